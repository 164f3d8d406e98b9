"""KIP-630 checks of migration.logdir.kraft_validate, on files from the test-only encoder."""

from __future__ import annotations

import os
import shutil

from typer.testing import CliRunner

from migration.cli.app import app
from migration.logdir.kraft_validate import validate_checkpoint_file, validate_metadata_log_dir
from migration.logdir.validate import ValidationResult
from migration.logdir.validation import validate_paths


def _codes(res: ValidationResult, severity: str = "error") -> list[str]:
    return [f.code for f in res.findings if f.severity == severity]


def _valid_dir(tmp_path, kraft):
    values, _ = kraft.bootstrap_values()
    kr = [(kraft.KRAFT_VERSION, kraft.kraft_version_value(1)), (kraft.KRAFT_VOTERS, kraft.default_voters())]
    voter = b"\x00\x00\x0b\xb8\x00"  # VoterId 3000, tags
    leader_change = b"\x00\x00" + b"\x00\x00\x0b\xb8" + b"\x02" + voter + b"\x02" + voter + b"\x00"
    seg = kraft.control_batch([(2, leader_change)], 0, epoch=1)
    return kraft.make_metadata_dir(tmp_path / "ctl", boot=kraft.bootstrap(values),
                                   zero=kraft.checkpoint(values, kraft=kr), segments={0: seg})


def test_clean_dir_is_clean(tmp_path, kraft):
    d = _valid_dir(tmp_path, kraft)
    res = validate_metadata_log_dir(d / kraft.METADATA_DIR, result=ValidationResult())
    assert res.ok, res.findings
    assert res.files_checked >= 3  # bootstrap.checkpoint, zero checkpoint, segment


def test_flipped_byte_found_with_file_and_position(tmp_path, kraft):
    d = _valid_dir(tmp_path, kraft)
    z = d / kraft.METADATA_DIR / kraft.ZERO
    os.chmod(z, 0o644)
    data = bytearray(z.read_bytes())
    hdr = len(kraft.control_batch([(3, kraft.header_value(0)), (5, kraft.kraft_version_value(1)),
                                   (6, kraft.default_voters())], 0))
    data[hdr + 80] ^= 0x10  # inside the data batch's records
    z.write_bytes(bytes(data))
    res = validate_checkpoint_file(z, result=ValidationResult())
    (f,) = res.problems
    assert f.file == str(z) and f.position == hdr + 17 and "CRC" in f.message  # the batch's CRC field
    # through the CLI, on the log dir
    out = CliRunner().invoke(app, ["validate", str(d)])
    assert out.exit_code == 1 and f"{z} @ byte {hdr + 17}" in out.output


def test_misnamed_checkpoint(tmp_path, kraft):
    d = _valid_dir(tmp_path, kraft)
    m = d / kraft.METADATA_DIR
    shutil.copy(m / kraft.ZERO, m / "0-0.checkpoint")
    shutil.copy(m / kraft.ZERO, m / "00000000000000000000-000000000.checkpoint")  # 9-digit epoch
    res = validate_metadata_log_dir(m, result=ValidationResult())
    bad = sorted(f.file for f in res.problems if f.code == "CHECKPOINT_NAME")
    assert bad == sorted([str(m / "0-0.checkpoint"), str(m / "00000000000000000000-000000000.checkpoint")])


def test_leftovers_are_warnings(tmp_path, kraft):
    d = _valid_dir(tmp_path, kraft)
    m = d / kraft.METADATA_DIR
    (m / "00000000000000000000-0000000000-123456.checkpoint.part").write_bytes(b"\x00" * 10)
    (m / "00000000000000000005-0000000001.checkpoint.deleted").write_bytes(b"")
    res = validate_metadata_log_dir(m, result=ValidationResult())
    assert not _codes(res)
    assert sorted(_codes(res, "warning")) == ["CHECKPOINT_DELETED", "CHECKPOINT_PARTIAL"]


def test_epoch_in_name_must_match_batches(tmp_path, kraft):
    values, _ = kraft.bootstrap_values()
    m = tmp_path / "m"
    m.mkdir()
    p = m / "00000000000000000007-0000000002.checkpoint"
    p.write_bytes(kraft.checkpoint(values, epoch=3))
    res = validate_checkpoint_file(p, result=ValidationResult())
    assert _codes(res) == ["CHECKPOINT_EPOCH"] * 3  # header, data, footer batches


def test_header_footer_and_control_record_rules(tmp_path, kraft):
    values, _ = kraft.bootstrap_values()
    m = tmp_path / "m"
    m.mkdir()
    no_footer = m / "00000000000000000001-0000000000.checkpoint"
    full = kraft.checkpoint(values)
    footer = kraft.control_batch([(kraft.SNAPSHOT_FOOTER, kraft.footer_value())], 3)
    no_footer.write_bytes(full[: -len(kraft.control_batch([(4, b"\x00\x00\x00")], 3))])
    assert _codes(validate_checkpoint_file(no_footer, result=ValidationResult())) == ["CHECKPOINT_FOOTER"]
    no_header = m / "00000000000000000002-0000000000.checkpoint"
    no_header.write_bytes(kraft.data_batch(values, 0) + kraft.control_batch([(4, b"\x00\x00\x00")], len(values)))
    assert "CHECKPOINT_HEADER" in _codes(validate_checkpoint_file(no_header, result=ValidationResult()))
    gap = m / "00000000000000000003-0000000000.checkpoint"
    gap.write_bytes(kraft.control_batch([(3, kraft.header_value(0))], 0) + kraft.data_batch(values, 5) + footer)
    assert "CHECKPOINT_OFFSET" in _codes(validate_checkpoint_file(gap, result=ValidationResult()))
    boot_kraft = m / "bootstrap.checkpoint"
    boot_kraft.write_bytes(kraft.checkpoint(values, kraft=[(kraft.KRAFT_VERSION, kraft.kraft_version_value(1))],
                                            header_ts=0))
    assert _codes(validate_checkpoint_file(boot_kraft, result=ValidationResult())) == ["BOOTSTRAP_KRAFT_RECORD"]
    unknown = m / "00000000000000000004-0000000000.checkpoint"
    frame = kraft.uvarint(1) + kraft.uvarint(9999) + kraft.uvarint(0)
    unknown.write_bytes(kraft.checkpoint([frame]))
    assert _codes(validate_checkpoint_file(unknown, result=ValidationResult())) == ["CHECKPOINT_API_KEY"]
    frame0 = m / "00000000000000000005-0000000000.checkpoint"
    frame0.write_bytes(kraft.checkpoint([b"\x00" + values[0][1:]]))
    assert _codes(validate_checkpoint_file(frame0, result=ValidationResult())) == ["CHECKPOINT_RECORD"]


def test_bootstrap_mv_rules(tmp_path, kraft):
    for mv, code in ((3, "error"), (6, "warning"), (7, None)):
        values, _ = kraft.bootstrap_values(mv=mv)
        d = tmp_path / f"mv{mv}"
        d.mkdir()
        (d / "bootstrap.checkpoint").write_bytes(kraft.bootstrap(values))
        res = validate_checkpoint_file(d / "bootstrap.checkpoint", result=ValidationResult())
        got = [f.severity for f in res.findings if f.code == "BOOTSTRAP_METADATA_VERSION"]
        assert got == ([code] if code else [])


def test_log_start_invariant(tmp_path, kraft):
    values, _ = kraft.bootstrap_values()
    seg = kraft.data_batch([kraft.feature_level("group.version", 1)], 10, epoch=1)
    d = kraft.make_metadata_dir(tmp_path / "ctl", zero=kraft.checkpoint(values), segments={10: seg})
    m = d / kraft.METADATA_DIR
    res = validate_metadata_log_dir(m, result=ValidationResult())
    assert _codes(res) == ["SNAPSHOT_MISSING"]
    assert _codes(res, "warning") == ["SNAPSHOT_STALE"]  # the zero checkpoint ends below 10
    (m / "00000000000000000010-0000000001.checkpoint").write_bytes(kraft.checkpoint(values, epoch=1))
    res = validate_metadata_log_dir(m, result=ValidationResult())
    assert not _codes(res)


def test_sample_controller_dir_is_clean(sample_cluster):
    res = validate_paths([sample_cluster.controller_dir])
    assert res.ok, [str(f) for f in res.problems]
    out = CliRunner().invoke(app, ["validate", str(sample_cluster.controller_dir)])
    assert out.exit_code == 0 and "clean" in out.output


def test_unknown_codec_id_in_a_snapshot_batch_is_a_finding_not_an_exception(tmp_path, kraft):
    # Found by tests/fuzz: codec bits 7 under a valid CRC made the compression check raise
    # UnsupportedCodecError out of validate_checkpoint_file and validate_paths.
    d = _valid_dir(tmp_path, kraft)
    z = d / kraft.METADATA_DIR / kraft.ZERO
    os.chmod(z, 0o644)
    data = bytearray(z.read_bytes())
    data[22] |= 0x07  # attributes of the header batch: codec id 7
    data[17:21] = kraft.calc_crc32c(bytes(data[21 : 12 + int.from_bytes(data[8:12], "big")])).to_bytes(4, "big")
    z.write_bytes(bytes(data))
    res = validate_checkpoint_file(z, result=ValidationResult())
    (f,) = res.problems
    assert (f.code, f.file, f.position) == ("CHECKPOINT_CORRUPT", str(z), 22)
    assert "compression" in f.message
    res = validate_paths([d])
    assert "CHECKPOINT_CORRUPT" in _codes(res)
