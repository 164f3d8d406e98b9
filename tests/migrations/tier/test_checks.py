"""tier-prepare checks what it stages (issue 31): an existing producer snapshot that is corrupt
(CRC, size, name) or whose offsets lie beyond its own is rebuilt from the log like a missing
one, never staged as it was; a bad leader-epoch-checkpoint fails the unit naming the file and
the byte, and nothing of the partition is staged."""

from __future__ import annotations

from migration.audit.model import UnitStatus
from migration.formats import names
from migration.formats.producer_snapshot import ProducerSnapshot
from migration.migrations.tier.driver import execute_tier

from .test_tier import _bases, _independent_state, _options, _pdir

PAY = "payments-idempotent-0"


def _staged_indexes(env) -> bytes:
    return b"".join(env.get(k) for k in env.objects() if k.endswith(".indexes"))


def test_corrupt_existing_snapshot_is_rebuilt_never_staged(sample_cluster, fs_store):
    pay = _pdir(sample_cluster, PAY)
    bases = _bases(pay)
    crc_bad = pay / names.producer_snapshot_file_name(bases[1])
    good = ProducerSnapshot([(4242, 3, 9, bases[1] - 1, 0, 1, -1, -1)]).to_bytes()
    corrupt = good[:-1] + bytes([good[-1] ^ 0xFF])  # the CRC no longer matches
    crc_bad.write_bytes(corrupt)
    beyond = pay / names.producer_snapshot_file_name(bases[2])
    beyond_bytes = ProducerSnapshot([(777, 1, 4, bases[2] + 10, 0, 1, -1, -1)]).to_bytes()  # a last offset past N
    beyond.write_bytes(beyond_bytes)

    report = execute_tier(sample_cluster.log_dirs, options=_options(fs_store, sample_cluster), engine="inline",
                          only_partitions=[PAY])
    assert report.exit_code() == 0, [e.message for *_, u in report.iter_units() for e in u.errors]
    for path, n in ((crc_bad, bases[1]), (beyond, bases[2])):
        snap = ProducerSnapshot.read(path)  # the strict reader: CRC, size, name
        assert all(e.last_offset < n for e in snap.entries)
        assert {tuple(e) for e in snap.entries} == _independent_state(pay, n)
    staged = _staged_indexes(fs_store)
    assert staged and corrupt not in staged and beyond_bytes not in staged
    said = {u.unit: w for *_, u in report.iter_units() for w in u.warnings if w.code == "SNAPSHOT_CORRUPT"}
    assert set(said) == {crc_bad.name, beyond.name}
    assert said[crc_bad.name].file == str(crc_bad) and said[crc_bad.name].position == 2  # the CRC field
    assert said[beyond.name].position is not None and str(beyond) in said[beyond.name].message


def test_corrupt_seed_snapshot_fails_the_unit_naming_it(sample_cluster, fs_store):
    pay = _pdir(sample_cluster, PAY)
    seed = pay / names.producer_snapshot_file_name(_bases(pay)[0])
    seed.write_bytes(b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01")  # one entry declared, none there
    report = execute_tier(sample_cluster.log_dirs, options=_options(fs_store, sample_cluster), engine="inline",
                          only_partitions=[PAY])
    assert report.exit_code() == 1
    errors = [e for *_, u in report.iter_units() for e in u.errors]
    assert any(str(seed) in e.message and "byte" in e.message for e in errors), errors
    assert not fs_store.objects()


def test_bad_leader_epoch_checkpoint_fails_naming_file_and_byte(sample_cluster, fs_store):
    events = _pdir(sample_cluster, "events-v2-0")
    ckpt = events / names.LEADER_EPOCH_CHECKPOINT_FILE
    ckpt.write_text("0\n2\n5 0\n3 100\n")  # the second entry goes back in epoch
    report = execute_tier(sample_cluster.log_dirs, options=_options(fs_store, sample_cluster), engine="inline",
                          only_partitions=["events-v2-0"])
    assert report.exit_code() == 1
    errors = [e for *_, u in report.iter_units() for e in u.errors]
    assert [(e.code, e.file, e.position) for e in errors] == [("LEADER_EPOCH_CORRUPT", str(ckpt), len("0\n2\n5 0\n"))]
    assert f"{ckpt} @ byte 8" in errors[0].message
    assert not [k for k in fs_store.objects() if "events-v2" in k]
    assert all(u.status is not UnitStatus.OK for *_, u in report.iter_units() if u.unit.endswith(".log"))
