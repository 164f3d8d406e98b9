"""Fuzz target: the upgrade's rewrite and digest on both record cores. A mutated segment is
rewritten to v1 and to v2 (``rewrite_segment``, small segment.bytes and max.message.bytes so
rolls and splits happen) and digested (``digest_log``) on the pure-Python core and on the
compiled one, whose segment walker converts, digests and indexes runs of batches in C: the
outcomes (result or error, output files byte for byte) must be equal."""

from __future__ import annotations

import shutil
from typing import Any

from fuzz.harness import Target, fix_crcs, fix_frame_lengths, fix_lengths_and_crcs, frame_hot
from fuzz.readers import scratch_dir
from migration.formats import core
from migration.formats.errors import KafkaFormatError
from migration.migrations.upgrade.rewrite import RewriteSpec, digest_log, rewrite_segment


def _outcome(fn: Any) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except KafkaFormatError as exc:
        return "error", (type(exc).__name__, exc.position, exc.message)


def _observe(data: bytes, target: int) -> list[Any]:
    d = scratch_dir() / "rewrite"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    log = d / "00000000000000000000.log"
    log.write_bytes(data)
    spec = RewriteSpec(target_magic=target, segment_bytes=4096, max_message_bytes=2048, index_interval_bytes=100,
                       leader_epochs=[(3, 0), (4, 7)])
    res = _outcome(lambda: rewrite_segment(log, spec).model_dump())
    seen: list[Any] = [res]
    for p in sorted(d.glob("*.cleaned")):
        seen.append((p.name, p.read_bytes()))
    seen.append(_outcome(lambda: [x.model_dump() if hasattr(x, "model_dump") else x for x in digest_log(log)]))
    return seen


def run(data: bytes, kind: str) -> None:
    for target in (1, 2):
        seen = {}
        for name in core.available():
            with core.use(name):
                seen[name] = _observe(data, target)
        if core.COMPILED in seen:
            assert seen[core.COMPILED] == seen[core.PYTHON], f"the cores disagree rewriting to v{target}"


def seed_check(data: bytes, name: str) -> None:
    for target in (1, 2):
        d = scratch_dir() / "seed"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
        (d / "00000000000000000000.log").write_bytes(data)
        rewrite_segment(d / "00000000000000000000.log", RewriteSpec(target_magic=target))


TARGET = Target("rewrite", run, fixups=(fix_frame_lengths, fix_crcs, fix_lengths_and_crcs), hot=frame_hot,
                quick_examples=150, seed_check=seed_check)


test_corpus, test_fuzz = TARGET.tests()
