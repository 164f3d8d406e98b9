"""tier-prepare against a moto S3 server over HTTP (and, where marked ``store_env``, against the
file-system store too): layout, snapshots, idempotence, crashes, secrets."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch

from migration.audit.model import UnitStatus
from migration.formats import names
from migration.formats.checkpoint_files import LeaderEpochCheckpointFile
from migration.formats.kafka_uuid import Uuid, uuid_from_name
from migration.formats.producer_snapshot import ProducerSnapshot
from migration.migrations.tier.driver import JSONL_NAME, execute_tier
from migration.migrations.tier.options import TierOptions

from .conftest import FAKE_SECRET_KEY

EMPTY = bytes.fromhex("0001 4867 4BC7 0000 0000")
V2_PARTITIONS = ["events-v2-0", "events-v2-1", "payments-idempotent-0"]
PREFIX = "tiered/"


def _options(env, sample, **kw) -> TierOptions:
    values = dict(**env.store_options(), prefix=PREFIX, part_size=4096, multipart_threshold=16384,
                  metadata_log_dirs=[str(sample.controller_dir)],
                  compacted_topics=list(sample.description.compacted_topics), connect_timeout=2, read_timeout=10,
                  max_attempts=2)
    values.update(kw)
    return TierOptions(**values)


def _pdir(sample, name: str) -> Path:
    for d in sample.log_dirs:
        if (d / name).is_dir():
            return d / name
    raise KeyError(name)


def _bases(pdir: Path) -> list[int]:
    return sorted(names.offset_from_file_name(p.name) for p in pdir.glob("*.log"))


def _objects(env) -> dict[str, int]:
    """Key -> size of everything in the store."""
    return env.objects()


def _get(env, key: str) -> bytes:
    return env.get(key)


def _stem(sample, pdir: Path, base: int) -> str:
    topic, partition = pdir.name.rsplit("-", 1)
    topic_id = sample.topic_ids[topic]
    sha = hashlib.sha256((pdir / names.log_file_name(base)).read_bytes()).hexdigest()
    seg = uuid_from_name(Uuid.from_string(topic_id), f"{partition}/{base}/{sha}")
    return f"{PREFIX}{topic}-{topic_id}/{partition}/{base:020d}-{seg.to_string()}"


def _kafka_python_batches(log: Path):
    """Independent reader: split by the length field, parse with kafka-python."""
    data = log.read_bytes()
    pos = 0
    while pos + 17 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        end = pos + 12 + length
        if data[pos + 16] == 2:
            yield DefaultRecordBatch(data[pos:end])
        pos = end


def _independent_state(pdir: Path, upto: int) -> set[tuple]:
    """Producer state at ``upto`` computed from kafka-python's view of the batches."""
    state: dict[int, dict] = {}
    for base in _bases(pdir):
        if base >= upto:
            break
        for b in _kafka_python_batches(pdir / names.log_file_name(base)):
            if b.producer_id < 0:
                continue
            s = state.setdefault(b.producer_id, {"epoch": -1, "batch": None, "ts": -1, "coord": -1, "txn": -1})
            if s["epoch"] != b.producer_epoch:
                s["epoch"], s["batch"] = b.producer_epoch, None
            if b.is_control_batch:
                rec = next(iter(b))
                ctype = struct.unpack_from(">h", rec.key, 2)[0]
                assert ctype in (0, 1)
                s["coord"] = struct.unpack_from(">i", rec.value, 2)[0]
                s["ts"] = rec.timestamp
                s["txn"] = -1
                continue
            last_seq = (b.base_sequence + b.last_offset_delta) % (1 << 31) if b.base_sequence >= 0 else -1
            s["batch"] = (last_seq, b.base_offset + b.last_offset_delta, b.last_offset_delta)
            s["ts"] = b.max_timestamp
            if b.is_transactional and s["txn"] < 0:
                s["txn"] = b.base_offset
    out = set()
    for pid, s in state.items():
        seq, last, delta = s["batch"] or (-1, -1, 0)
        out.add((pid, s["epoch"], seq, last, delta, s["ts"], s["coord"], s["txn"]))
    return out


# ------------------------------------------------------------------------------------ tests


def test_layout_manifest_and_indexes_object_by_object(sample_cluster, store_env):
    s3 = store_env
    report = execute_tier(sample_cluster.log_dirs, options=_options(s3, sample_cluster))
    objects = _objects(s3)
    seen: set[str] = set()
    multipart = 0
    for name in V2_PARTITIONS:
        pdir = _pdir(sample_cluster, name)
        bases = _bases(pdir)
        node_id = int(next(line.split("=")[1] for line in (pdir.parent / "meta.properties").read_text().splitlines()
                           if line.startswith("node.id")))
        epochs = LeaderEpochCheckpointFile.read(pdir / "leader-epoch-checkpoint").entries
        assert len(bases) >= 3
        for base, nxt in zip(bases, bases[1:], strict=False):
            stem = _stem(sample_cluster, pdir, base)
            for suffix in (".log", ".indexes", ".rsm-manifest"):
                assert stem + suffix in objects, f"missing {stem}{suffix}"
                seen.add(stem + suffix)
            prefix = pdir / names.filename_prefix_from_offset(base)
            log_bytes = Path(str(prefix) + ".log").read_bytes()
            assert _get(s3, stem + ".log") == log_bytes
            if len(log_bytes) >= 16384:
                multipart += 1
                if s3.kind == "s3":  # the server's own word: a multipart ETag ends in the part count
                    etag = s3.client().head_object(Bucket=s3.bucket, Key=stem + ".log")["ETag"]
                    assert etag.strip('"').endswith(f"-{-(-len(log_bytes) // 4096)}"), etag
            manifest = json.loads(_get(s3, stem + ".rsm-manifest"))
            assert manifest["version"] == "1" and manifest["compression"] is False
            ci = manifest["chunkIndex"]
            assert ci["originalFileSize"] == len(log_bytes) and ci["type"] == "fixed"
            assert set(ci) >= {"originalChunkSize", "transformedChunkSize", "finalTransformedChunkSize"}
            blob = _get(s3, stem + ".indexes")
            idx = manifest["segmentIndexes"]

            def piece(k, idx=idx, blob=blob):
                return blob[idx[k]["position"]: idx[k]["position"] + idx[k]["size"]]

            assert piece("offset") == Path(str(prefix) + ".index").read_bytes()
            assert piece("timestamp") == Path(str(prefix) + ".timeindex").read_bytes()
            assert piece("producerSnapshot") == (pdir / names.producer_snapshot_file_name(nxt)).read_bytes()
            expected_epochs = [e for e in epochs if e.start_offset < nxt]
            assert piece("leaderEpoch") == (f"0\n{len(expected_epochs)}\n" + "".join(
                f"{e.epoch} {e.start_offset}\n" for e in expected_epochs)).encode()
            txn = Path(str(prefix) + ".txnindex")
            if txn.exists():
                assert piece("transaction") == txn.read_bytes()
            else:
                assert idx["transaction"] is None
            total = sum(v["size"] for v in idx.values() if v)
            assert total == len(blob)
            meta = manifest["remoteLogSegmentMetadata"]
            topic, partition = name.rsplit("-", 1)
            sid = meta["remoteLogSegmentId"]
            assert sid["topicIdPartition"] == {"topicId": sample_cluster.topic_ids[topic],
                                               "topicPartition": {"topic": topic, "partition": int(partition)}}
            assert stem.endswith("-" + sid["id"]) and len(sid["id"]) == 22 and "=" not in sid["id"]
            assert base64.urlsafe_b64decode(sid["id"] + "==") and meta["brokerId"] == node_id
            assert (meta["startOffset"], meta["endOffset"]) == (base, nxt - 1)
            assert meta["segmentSizeInBytes"] == len(log_bytes)
            assert meta["segmentLeaderEpochs"] and min(meta["segmentLeaderEpochs"].values()) == base
            max_ts = max(b.max_timestamp for b in _kafka_python_batches(Path(str(prefix) + ".log")))
            assert meta["maxTimestampMs"] == max_ts
        # The active segment is never uploaded.
        topic, partition = name.rsplit("-", 1)
        assert not [k for k in objects if f"/{partition}/{bases[-1]:020d}-" in k and f"{topic}-" in k]
    assert multipart > 0, "no segment went through a multipart upload"
    # Nothing else was staged: the legacy partitions have no leader epochs, compacted ones are not ready.
    assert set(objects) == seen
    assert s3.uploads() == []
    # The JSONL holds one COPY_SEGMENT_FINISHED record per staged segment.
    from migration.settings import runs_dir

    lines = [json.loads(x) for x in (runs_dir() / report.run_id / JSONL_NAME).read_text().splitlines()]
    assert len(lines) == len(seen) // 3
    assert {x["record"]["RemoteLogSegmentState"] for x in lines} == {1}
    results = json.loads((runs_dir() / report.run_id / "results.json").read_text())["results"]
    assert sum(r["requests"].get("CompleteMultipartUpload", 0) for r in results) == multipart


def test_snapshots_empty_rebuilt_and_existing(sample_cluster, s3):
    pay = _pdir(sample_cluster, "payments-idempotent-0")
    pay_bases = _bases(pay)
    # An existing snapshot at a boundary must be left alone, whatever it says.
    existing = pay / names.producer_snapshot_file_name(pay_bases[1])
    existing_bytes = ProducerSnapshot([(4242, 3, 9, pay_bases[1] - 1, 0, 1, -1, -1)]).to_bytes()
    existing.write_bytes(existing_bytes)
    os.utime(existing, ns=(1_500_000_000_000_000_000, 1_500_000_000_000_000_000))
    events = _pdir(sample_cluster, "events-v2-0")
    leo_snapshot = sorted(events.glob("*.snapshot"))
    leo_before = [(p, p.read_bytes(), p.stat().st_mtime_ns) for p in leo_snapshot]

    report = execute_tier(sample_cluster.log_dirs, options=_options(s3, sample_cluster, snapshots_only=True))
    assert not _objects(s3), "snapshots-only uploaded something"

    assert existing.read_bytes() == existing_bytes
    assert existing.stat().st_mtime_ns == 1_500_000_000_000_000_000
    for p, data, mtime in leo_before:
        assert p.read_bytes() == data and p.stat().st_mtime_ns == mtime
    # v2 without producer ids and v0/v1 data: the 10-byte empty snapshot at every boundary.
    for name in ("events-v2-0", "events-v2-1", "legacy-v0-0", "clicks-v1-0", "orders-upgraded-0"):
        pdir = _pdir(sample_cluster, name)
        for n in _bases(pdir)[1:]:
            assert (pdir / names.producer_snapshot_file_name(n)).read_bytes() == EMPTY, (name, n)
    # The idempotent/transactional partition: state rebuilt, equal to an independent replay.
    rebuilt = [n for n in pay_bases[1:] if n != pay_bases[1]]
    assert rebuilt
    for n in rebuilt:
        snap = ProducerSnapshot.read(pay / names.producer_snapshot_file_name(n))
        assert len(snap) > 0
        assert {tuple(e) for e in snap.entries} == _independent_state(pay, n)
    # No snapshot at an offset that is not a segment base offset was created.
    for d in sample_cluster.log_dirs:
        for p in d.glob("*/*.snapshot"):
            off = names.offset_from_file_name(p.name)
            assert off in _bases(p.parent) or off > _bases(p.parent)[-1]
        assert not list(d.glob("*/*.tmp"))
    # No topic id anywhere: not ready, nothing written there.
    audit = _pdir(sample_cluster, "audit-lat-0")
    assert not list(audit.glob("*.snapshot"))
    bad = [(t, p, u) for _, t, p, u in report.iter_units() if t == "audit-lat"]
    assert len(bad) == 1 and bad[0][2].status is UnitStatus.FAILED and bad[0][2].errors[0].code == "NO_TOPIC_ID"
    assert report.exit_code() == 1


def test_cli_exit_code_not_ready_and_no_secret_anywhere(sample_cluster, s3, caplog):
    import logging

    from typer.testing import CliRunner

    from migration.cli.app import app

    caplog.set_level(logging.DEBUG)
    args = ["tier-prepare", *map(str, sample_cluster.log_dirs), "--bucket", s3.bucket, "--endpoint-url", s3.endpoint,
            "--prefix", PREFIX, "--cluster", str(sample_cluster.description_path), "--part-size", "4096",
            "--multipart-threshold", "16384", "--engine", "inline"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 1, res.output
    # The cluster description keeps audit-lat (no topic id) out: ineligible, with the reason.
    assert "ineligible audit-lat-0: topic excluded by the operator: not in the metadata log" in res.output
    # Legacy data without leader epochs fails, naming the fix; the v2 partitions are staged.
    assert "no leader epoch covers" in res.output and "--assign-leader-epoch" in res.output
    assert len(_objects(s3)) > 0
    # The secret is nowhere: output, logs, run dir, reports.
    assert FAKE_SECRET_KEY not in res.output
    assert FAKE_SECRET_KEY not in caplog.text
    files = [p for p in s3.out.rglob("*") if p.is_file()]
    assert any(p.name == "report.json" for p in files) and any(p.name == JSONL_NAME for p in files)
    for p in files:
        assert FAKE_SECRET_KEY.encode() not in p.read_bytes(), p
    report = json.loads(next(p for p in files if p.name == "report.json").read_text())
    assert report["params"]["endpoint_url"] == s3.endpoint and report["params"]["bucket"] == s3.bucket
    # Settings never dump credentials, even when they hold them (Airflow connections).
    from migration.migrations.tier.s3 import S3Settings

    st = S3Settings(endpoint_url=s3.endpoint, access_key_id="AKIAX", secret_access_key=FAKE_SECRET_KEY)
    assert FAKE_SECRET_KEY not in st.model_dump_json() + repr(st) + str(st.model_dump())


def test_rerun_uploads_nothing(sample_cluster, store_env):
    opts = _options(store_env, sample_cluster)
    execute_tier(sample_cluster.log_dirs, options=opts, only_partitions=V2_PARTITIONS)
    before = store_env.versions()
    assert before
    report = execute_tier(sample_cluster.log_dirs, options=opts, only_partitions=V2_PARTITIONS)
    assert report.exit_code() == 0
    assert store_env.versions() == before
    from migration.settings import runs_dir

    results = json.loads((runs_dir() / report.run_id / "results.json").read_text())["results"]
    for r in results:
        assert not {"PutObject", "UploadPart", "CreateMultipartUpload", "DeleteObjects"} & set(r["requests"]), r
    segs = [u for *_, u in report.iter_units() if u.unit.endswith(".log")]
    assert segs and all(u.status is UnitStatus.SKIPPED for u in segs)


def test_rerun_says_which_run_staged_each_segment(sample_cluster, store_env):
    """Issue 28, item 4: a re-run's skipped segments said nothing (verdict ok, bytes after 0),
    which read like data loss; each now says it was staged already, and by which run."""
    opts = _options(store_env, sample_cluster)
    first = execute_tier(sample_cluster.log_dirs, options=opts, only_partitions=V2_PARTITIONS)
    again = execute_tier(sample_cluster.log_dirs, options=opts, only_partitions=V2_PARTITIONS)
    segs = [u for *_, u in again.iter_units() if u.unit.endswith(".log")]
    assert segs and all(u.status is UnitStatus.SKIPPED for u in segs)
    for u in segs:
        assert [w.code.value for w in u.warnings] == ["ALREADY_STAGED"], u
        assert f"already staged by run {first.run_id} on " in u.warnings[0].message


def _assert_consistent(env) -> None:
    """Every staged segment complete, no multipart upload left, no orphan of any kind."""
    by_stem: dict[str, set[str]] = {}
    for k in _objects(env):
        stem, suffix = k.rsplit(".", 1)
        by_stem.setdefault(stem, set()).add(suffix)
    assert by_stem
    for stem, suffixes in by_stem.items():
        assert suffixes == {"log", "indexes", "rsm-manifest"}, (stem, suffixes)
    assert env.uploads() == []


def test_server_killed_mid_upload_then_restarted(sample_cluster, s3, monkeypatch):
    from migration.migrations.tier import store as s3_hook

    original = s3_hook.ObjectStore._count
    calls = {"UploadPart": 0}

    def count(self, op):
        if op == "UploadPart":
            calls["UploadPart"] += 1
            if calls["UploadPart"] == 5:
                s3.server.kill()  # mid multipart upload: the next part never arrives
        return original(self, op)

    monkeypatch.setattr(s3_hook.ObjectStore, "_count", count)
    opts = _options(s3, sample_cluster, connect_timeout=1, read_timeout=2, max_attempts=1)
    first = execute_tier(sample_cluster.log_dirs, options=opts, only_partitions=V2_PARTITIONS)
    assert first.exit_code() == 1
    assert any(u.status is UnitStatus.FAILED for *_, u in first.iter_units())
    monkeypatch.setattr(s3_hook.ObjectStore, "_count", original)
    s3.server.restart()  # moto's state is in memory: the restarted server is empty
    s3.create_bucket()
    second = execute_tier(sample_cluster.log_dirs, options=opts, only_partitions=V2_PARTITIONS)
    assert second.exit_code() == 0, [u.errors for *_, u in second.problem_units()]
    _assert_consistent(s3)
    expected = sum(len(_bases(_pdir(sample_cluster, n))) - 1 for n in V2_PARTITIONS)
    assert len(_objects(s3)) == 3 * expected


CRASHING_RUN = textwrap.dedent("""
    import json, os, sys
    from migration.migrations.tier import store as hook
    from migration.migrations.tier.driver import execute_tier
    from migration.migrations.tier.options import TierOptions
    crash_on, crash_at = sys.argv[1], int(sys.argv[2])
    seen = {"n": 0}
    original = hook.ObjectStore._count
    def count(self, op):
        if op == crash_on:
            seen["n"] += 1
            if seen["n"] == crash_at:
                os._exit(9)  # the client dies: no abort, no cleanup
        return original(self, op)
    hook.ObjectStore._count = count
    opts = TierOptions.model_validate_json(sys.argv[3])
    execute_tier(json.loads(sys.argv[4]), options=opts, only_partitions=json.loads(sys.argv[5]))
""")


@pytest.mark.parametrize("crash_on,crash_at", [("UploadPart", 4), ("PutObject", 2)])
def test_client_crash_leaves_partial_state_rerun_cleans_up_and_completes(sample_cluster, store_env, crash_on,
                                                                          crash_at):
    """A crash mid multipart upload leaves an incomplete upload; one between objects leaves a
    data object without manifest. A re-run aborts/removes them (or verifies and reuses its own).
    The first PutObject is the run's write probe."""
    s3 = store_env
    opts = _options(s3, sample_cluster)
    dirs = [str(d) for d in sample_cluster.log_dirs]
    proc = subprocess.run([sys.executable, "-c", CRASHING_RUN, crash_on, str(crash_at), opts.model_dump_json(),
                           json.dumps(dirs), json.dumps(["payments-idempotent-0"])], capture_output=True, text=True,
                          env={**os.environ}, timeout=120)
    assert proc.returncode == 9, proc.stderr
    objects = _objects(s3)
    uploads = s3.uploads()
    manifests = [k for k in objects if k.endswith(".rsm-manifest")]
    data = [k for k in objects if not k.endswith(".rsm-manifest")]
    # The crash really left something behind that is not a complete segment.
    assert uploads or len(data) > 2 * len(manifests)
    # A foreign orphan (another segment uuid, no manifest) and a stale upload under the prefix.
    pay = _pdir(sample_cluster, "payments-idempotent-0")
    part_prefix = _stem(sample_cluster, pay, 0).rsplit("/", 1)[0] + "/"
    foreign = part_prefix + "00000000000000000000-AAAAAAAAAAAAAAAAAAAAZA.log"
    s3.put_raw(foreign, b"stale")
    s3.start_upload(part_prefix + "00000000000000000000-x.log")

    report = execute_tier(sample_cluster.log_dirs, options=opts, only_partitions=["payments-idempotent-0"])
    assert report.exit_code() == 0, [u.errors for *_, u in report.problem_units()]
    _assert_consistent(s3)
    assert foreign not in _objects(s3)
    bases = _bases(pay)
    for base in bases[:-1]:
        assert _get(s3, _stem(sample_cluster, pay, base) + ".log") == (pay / names.log_file_name(base)).read_bytes()
    codes = {f.code for *_, u in report.iter_units() for f in u.warnings}
    assert "ORPHAN_REMOVED" in codes and "STALE_MULTIPART" in codes


def test_refused_when_a_live_broker_holds_the_lock(sample_cluster, s3):
    from typer.testing import CliRunner

    from migration.cli.app import app

    lock = sample_cluster.log_dirs[0] / ".lock"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT)\n"
        "fcntl.lockf(fd, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(60)\n")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = sorted(p.name for d in sample_cluster.log_dirs for p in d.glob("*/*.snapshot"))
        res = CliRunner().invoke(app, ["tier-prepare", *map(str, sample_cluster.log_dirs), "--bucket", s3.bucket,
                                       "--endpoint-url", s3.endpoint, "--engine", "inline"])
        assert res.exit_code == 3, res.output
        assert sorted(p.name for d in sample_cluster.log_dirs for p in d.glob("*/*.snapshot")) == before
        assert not _objects(s3)
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_spark_engine(sample_cluster, s3, spark):
    opts = _options(s3, sample_cluster)
    report = execute_tier(sample_cluster.log_dirs, options=opts, engine="spark", spark=spark,
                          only_partitions=["events-v2-1", "payments-idempotent-0"])
    assert report.exit_code() == 0, [u.errors for *_, u in report.problem_units()]
    _assert_consistent(s3)
    pay = _pdir(sample_cluster, "payments-idempotent-0")
    bases = _bases(pay)
    for base in bases[:-1]:
        assert _stem(sample_cluster, pay, base) + ".rsm-manifest" in _objects(s3)
    for n in bases[1:]:
        assert {tuple(e) for e in ProducerSnapshot.read(pay / names.producer_snapshot_file_name(n)).entries} == \
            _independent_state(pay, n)


def test_verify_reads_back_and_catches_a_changed_object(store_env, tmp_path):
    from migration.migrations.tier.store import ChecksumMismatch, file_sha256

    s3 = store_env
    hook = s3.open()
    src = tmp_path / "seg.log"
    src.write_bytes(os.urandom(10_000))
    obj = hook.upload_file("k.log", src, sha256=file_sha256(src), part_size=4096, multipart_threshold=4096)
    assert len(obj.parts) == 3 and hook.requests["UploadPart"] == 3
    assert _get(s3, "k.log") == src.read_bytes()
    # Same size, same claimed SHA-256 in the metadata, different bytes: the read-back catches it.
    s3.corrupt("k.log")
    assert _get(s3, "k.log") != src.read_bytes()
    assert hook.matches("k.log", size=10_000, sha256=obj.sha256)
    with pytest.raises(ChecksumMismatch):
        hook.verify("k.log", size=10_000, sha256=obj.sha256, parts=obj.parts)
    # A file that changes under the upload is refused and nothing is left behind.
    with pytest.raises(ChecksumMismatch):
        hook.upload_file("other.log", src, sha256="0" * 64, part_size=4096, multipart_threshold=4096)
    assert "other.log" not in _objects(s3)
    assert s3.uploads() == []


def test_settings_from_airflow_connection_keep_the_secret_out_of_dumps(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_KMIGRATE_S3", json.dumps({
        "conn_type": "aws", "login": "AKIAFROMAIRFLOW", "password": FAKE_SECRET_KEY,
        "extra": {"endpoint_url": "http://127.0.0.1:9", "region_name": "eu-west-1",
                  "config_kwargs": {"s3": {"addressing_style": "virtual"}}}}))
    from migration.migrations.tier.s3 import s3_settings_from_airflow_connection

    st = s3_settings_from_airflow_connection("kmigrate_s3")
    assert st.endpoint_url == "http://127.0.0.1:9" and st.region == "eu-west-1" and st.path_style is False
    assert st.secret_access_key is not None and st.secret_access_key.get_secret_value() == FAKE_SECRET_KEY
    assert FAKE_SECRET_KEY not in st.model_dump_json() + repr(st)
    assert st.aws_conn_id == "kmigrate_s3"


def test_compacted_topic_is_reported_ineligible(sample_cluster, s3):
    """Kafka does not tier compacted topics: reported ineligible with the reason, never a
    failure (exit 0)."""
    from migration.migrations.tier.driver import execute_tier

    broker = next(b for b, d in sample_cluster.broker_log_dirs.items() if (d / "users-compacted-0").is_dir())
    report = execute_tier([str(sample_cluster.broker_log_dirs[broker])], options=_options(s3, sample_cluster),
                          only_partitions=["users-compacted-0"])
    units = [u for _, topic, _, u in report.iter_units() if topic == "users-compacted"]
    assert units and all(u.status.value == "ineligible" and u.warnings[0].code == "COMPACTED" and not u.errors
                         for u in units)
    assert report.exit_code() == 0 and report.totals.units_ineligible == len(units)


def test_missing_or_empty_indexes_are_rebuilt_before_staging(sample_cluster, store_env):
    """A closed segment without its .index, or with an empty .timeindex beside timestamps, is
    not refused: both indexes are rebuilt from the .log with Kafka's recovery rules (the same
    builder the upgrade uses), reported, and staged."""
    pdir = _pdir(sample_cluster, "events-v2-0")
    bases = _bases(pdir)
    first, second = (pdir / names.filename_prefix_from_offset(b) for b in bases[:2])
    expected_index = Path(str(first) + ".index").read_bytes()
    expected_time = Path(str(second) + ".timeindex").read_bytes()
    Path(str(first) + ".index").unlink()
    Path(str(second) + ".timeindex").write_bytes(b"")
    report = execute_tier(sample_cluster.log_dirs, options=_options(store_env, sample_cluster),
                          only_partitions=["events-v2-0"])
    assert report.exit_code() == 0, [(u.unit, [e.message for e in u.errors]) for *_, u in report.problem_units()]
    rebuilt = {u.unit: w.message for *_, u in report.iter_units() for w in u.warnings if w.code == "INDEX_REBUILT"}
    assert set(rebuilt) == {first.name + ".log", second.name + ".log"}, rebuilt
    assert Path(str(first) + ".index").read_bytes() == expected_index
    assert Path(str(second) + ".timeindex").read_bytes() == expected_time
    objects = _objects(store_env)
    assert _stem(sample_cluster, pdir, bases[0]) + ".rsm-manifest" in objects
    assert _stem(sample_cluster, pdir, bases[1]) + ".rsm-manifest" in objects


def test_complete_stems_need_every_object_of_the_layout():
    from migration.migrations.tier import layout

    a, b = "00000000000000000005-AAAAAAAAAAAAAAAAAAAAAA", "00000000000000000005-BBBBBBBBBBBBBBBBBBBBBB"
    keys = [a + ".log", a + ".indexes", a + ".rsm-manifest", b + ".log", b + ".indexes",
            "00000000000000000050-CCCCCCCCCCCCCCCCCCCCCC.log"]
    assert layout.complete_stems(keys, 5) == {a: a + ".log"}
    assert layout.complete_stems(keys, 50) == {}
