"""A real Kafka broker loads a sample of the upgrade's power-loss crash states (issue 31: "With
the real-Kafka harness, load a sample of the crash states in a real broker too").

The upgrade of tests/migrations/upgrade/test_power_loss.py (its log dir builder, its job, its
run id) is recorded with strace, and a rollback started from the middle of it too; crash states
(tests/support/powerloss.py; the POSIX rules reach no state of their own, as the upgrade's
power-loss test requires) are sampled across the run: ``.cleaned`` files written before the
first swap, the first ``.swap``, mid-replace (originals ``.deleted``, new files ``.swap``), the
last quarter, the end, and states of the rollback.
Each state's log dir goes under topics of its own on one Kafka 4.x node, as the realkafka tests
install segments (topics created first, every file of the state's partition directory, leftovers
included, put under the new partition directory keeping its ``partition.metadata``; the
clean-shutdown marker and the recovery points removed), and one recovering start loads them all.
Required: no complaint in Kafka's log for any of them, each partition's "Completed load" numbers
those of kmigrate's model of the loader (kafka_loader.py) on the same state, and every record the
real Java consumer serves equal to the original's (modulo the documented v0 -> v2 timestamp type).
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support import kafka as realkafka
from support import powerloss as pl
from support.kafka import ConsumedRecord, Load, judge_load, read_files, record_diff, upgraded

pytestmark = [pytest.mark.realkafka, pytest.mark.usefixtures("strace_installed")]
UPGRADE_TEST = Path(__file__).resolve().parents[1] / "migrations" / "upgrade" / "test_power_loss.py"
# every state _sample looks for: each must be found (a distinct state), none silently left out
SAMPLES = {"run-cleaned", "run-first-swap", "run-mid-replace", "run-late", "run-end",
           "rb-rollback-staged", "rb-rollback-swap", "rb-rollback-late"}


def _upgrade_power_loss():  # noqa: ANN202 - the module
    """tests/migrations/upgrade/test_power_loss.py: its log dir, job and run id."""
    pl._kafka_loader()  # its directory on sys.path (the module imports kafka_loader)
    spec = importlib.util.spec_from_file_location("upgrade_power_loss_for_kafka", UPGRADE_TEST)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _sample(rec: pl.Recording, rel: str, tag: str) -> dict[str, pl.CrashState]:
    """A few distinct states spread over the recording."""
    states = rec.crash_states()
    n = len(rec.ops)

    def has(st: pl.CrashState, *suffixes: str) -> bool:
        names = st.names(rel)
        return all(any(x.endswith(s) for x in names) for s in suffixes)

    picks: dict[str, pl.CrashState] = {}

    def pick(name: str, pred) -> None:  # noqa: ANN001
        for st in states:
            if pred(st) and st.digest not in {p.digest for p in picks.values()}:
                picks[f"{tag}-{name}"] = st
                return

    ext4 = [st for st in states if st.model == pl.EXT4]
    if tag == "run":
        pick("cleaned", lambda st: st.model == pl.EXT4 and has(st, ".cleaned") and not has(st, ".swap"))
        pick("first-swap", lambda st: st.model == pl.EXT4 and has(st, ".swap"))
        pick("mid-replace", lambda st: st.model == pl.EXT4 and st.point >= n // 2 and has(st, ".deleted", ".swap"))
        pick("late", lambda st: st.model == pl.EXT4 and 3 * n // 4 <= st.point < ext4[-1].point)
        picks[f"{tag}-end"] = ext4[-1]
    else:
        pick("rollback-staged", lambda st: st.model == pl.EXT4 and st.point > 0 and has(st, ".cleaned"))
        pick("rollback-swap", lambda st: st.model == pl.EXT4 and has(st, ".swap") and st.point >= n // 3)
        pick("rollback-late", lambda st: st.model == pl.EXT4 and st.point >= 3 * n // 4)
    return picks


def _install(node: realkafka.KafkaNode, placements: dict[str, Path]) -> None:
    """As ``KafkaNode.install_segments``, but every file of the source directory (a crash state's
    ``.cleaned``, ``.swap`` and ``.deleted`` leftovers too: what Kafka's loader resolves)."""
    assert node.proc is None
    for tp, src in placements.items():
        dst = node.data / tp
        assert (dst / "partition.metadata").is_file(), f"{dst}: create the topic first"
        for f in dst.iterdir():
            if f.name != "partition.metadata":
                f.unlink() if f.is_file() else shutil.rmtree(f)
        for f in sorted(src.iterdir()):
            if f.is_file() and f.name != "partition.metadata":
                shutil.copy2(f, dst / f.name)
    cp = node.data / "recovery-point-offset-checkpoint"
    if cp.exists():
        realkafka.write_offset_checkpoint(cp, [e for e in realkafka.read_offset_checkpoint(cp)
                                               if f"{e[0]}-{e[1]}" not in placements])
    (node.data / ".kafka_cleanshutdown").unlink(missing_ok=True)


def _normal(records: list) -> list[ConsumedRecord]:
    """Records as served, the v0 -> v2 timestamp type made equal (a state mixes both)."""
    return [ConsumedRecord(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers)
            for r in upgraded(records)]


def test_a_real_broker_loads_sampled_power_loss_states(tmp_path_factory, kafka_node_factory) -> None:
    t0 = time.monotonic()
    up = _upgrade_power_loss()
    work = tmp_path_factory.mktemp("power-loss-states")
    root, scratch = work / "root", work / "scratch"
    root.mkdir()
    scratch.mkdir()
    log_dir = root / "kafka-logs"
    up.build_log_dir(log_dir)
    original = {p.name: read_files(p) for p in sorted(log_dir.iterdir()) if p.is_dir()}
    env = pl.traced_env(root)
    argv = [sys.executable, str(up.CRASH_JOB), up.RUN_ID, "v2", str(up.SEGMENT_BYTES), str(log_dir)]
    run = pl.record(argv, root, env=env, cwd=scratch)
    assert run.returncode == 0, run.stderr[-3000:]
    rel = run.rel(log_dir)
    samples = _sample(run, rel, "run")
    # a rollback started from the middle of the upgrade, recorded the same way
    mid = samples[next(k for k in samples if k.endswith("mid-replace"))]
    pl.materialize(mid, root)
    script = textwrap.dedent(f"""
        import sys
        from migration.migrations.upgrade.driver import rollback_run
        sys.exit(rollback_run({up.RUN_ID!r}).exit_code())
    """)
    rb = pl.record(pl.python_script(script, scratch / "rollback.py"), root, env=env, cwd=scratch)
    assert rb.returncode == 0, rb.stderr[-3000:]
    samples |= _sample(rb, rel, "rb")
    assert set(samples) == SAMPLES, f"found {sorted(samples)}, want {sorted(SAMPLES)}"
    recorded = time.monotonic() - t0

    # Each state: its partitions under topics "s<i>-<topic>"; what the loader model expects of them.
    placements: dict[str, Path] = {}
    expected: dict[str, Load] = {}
    want: dict[str, list[ConsumedRecord]] = {}
    where: dict[str, str] = {}
    for i, (name, st) in enumerate(sorted(samples.items())):
        rec = run if name.startswith("run") else rb
        state_dir = work / "states" / name
        pl.materialize(st, rec.root, subtree=rel, dest=state_dir)
        model = work / "model" / name
        shutil.copytree(state_dir, model)
        pl._kafka_loader().simulate_log_dir_startup(model)
        for p in sorted(state_dir.iterdir()):
            if p.is_dir():
                tp = f"s{i}-{p.name}"
                placements[tp] = p
                expected[tp] = read_files(model / p.name).load
                want[tp] = _normal(original[p.name].records)
                where[tp] = rec.describe(st, last=3)
    leftovers = {f.suffix.lstrip(".") for p in placements.values() for f in p.iterdir()}
    assert {"cleaned", "swap", "deleted"} <= leftovers, leftovers  # Kafka's loader has leftovers to resolve
    topics = {tp.rsplit("-", 1)[0]: (1, {"retention.ms": "-1", "retention.bytes": "-1"}) for tp in placements}

    node = kafka_node_factory(realkafka.LATEST)
    node.start()
    node.create_topics(topics)
    node.stop()
    _install(node, placements)
    node.start()
    load_log = node.run_log()
    consumed = node.consume(sorted(topics))
    node.stop()
    judge_load(load_log, expected, log_path=node.server_log, all_partitions=placements)
    problems = [f"{tp}: {d}\n{where[tp]}" for tp in sorted(placements)
                if (d := record_diff(_normal(consumed.get(tp, [])), want[tp]))]
    assert not problems, "\n".join(problems)
    print(f"\n{len(samples)} crash states ({len(placements)} partitions) loaded by Kafka {node.version} in "
          f"{time.monotonic() - t0:.1f}s (recording {recorded:.1f}s): {', '.join(sorted(samples))}")
