"""The sample legacy cluster the demo, the tests and the benchmarks run on: deterministic for a
seed, clean for the validator, and with the history its docstring promises (formats per topic,
the compacted topic, the topic the metadata log does not know, excluded from tiering)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from migration.demo.sample_cluster import TOPICS, build_sample_cluster
from migration.logdir.model import scan_log_dir
from migration.logdir.validation import validate_paths


def _tree(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            if p.name == "cluster.json":  # holds the absolute paths
                continue
            data = p.read_bytes()
            if p.name == "meta.properties":  # Java's Properties.store writes the time as a comment, as Kafka's does
                data = b"".join(line for line in data.splitlines(keepends=True) if not line.startswith(b"#"))
            out[str(p.relative_to(root))] = hashlib.sha256(data).hexdigest()
    return out


def test_same_seed_same_bytes(tmp_path):
    a = build_sample_cluster(tmp_path / "a", seed=11)
    b = build_sample_cluster(tmp_path / "b", seed=11)
    assert _tree(a.root) == _tree(b.root)
    assert _tree(build_sample_cluster(tmp_path / "c", seed=12).root) != _tree(a.root)


def test_the_history_it_promises(sample_cluster_template):
    sc = sample_cluster_template
    assert validate_paths([*sc.log_dirs, sc.controller_dir]).ok
    formats: dict[str, set[str]] = {}
    for d in sc.log_dirs:
        for p in scan_log_dir(d, deep=True).partitions:
            formats.setdefault(p.topic, set()).update(p.formats())
    assert formats["legacy-v0"] == {"v0"} and formats["clicks-v1"] == {"v1"}
    assert formats["orders-upgraded"] == {"v0", "v1"} and formats["events-v2"] == {"v2"}
    desc = sc.description
    assert [t.name for t in TOPICS if t.compacted] == desc.compacted_topics == ["users-compacted"]
    # a topic the metadata log does not know is kept out of tiering, with the reason
    assert set(desc.exclusions("tier")) == {t.name for t in TOPICS if not t.in_metadata_log} == {"audit-lat"}
    assert desc.exclusions("upgrade") == {}
    assert sum(sc.records.values()) > 6000
