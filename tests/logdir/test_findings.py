"""The one finding type, its code vocabulary and the location formatter."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from migration.formats.errors import CorruptRecordError
from migration.logdir.findings import Finding, FindingCode, locate

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("file", "position", "text"), [
    ("/d/t-0/00000000000000000000.log", 61, "/d/t-0/00000000000000000000.log @ byte 61"),
    ("/d/t-0/00000000000000000000.log", 0, "/d/t-0/00000000000000000000.log @ byte 0"),
    (Path("/d/x.index"), None, "/d/x.index"),
    (None, 12, "byte 12"),
    ("", 12, "byte 12"),
    (None, None, ""),
])
def test_locate(file, position, text) -> None:
    assert locate(file, position) == text


def test_str_of_a_validator_finding_and_of_a_report_finding() -> None:
    v = Finding(severity="error", code=FindingCode.CORRUPT_BATCH, file="/d/a.log", position=61, message="bad crc",
                partition="t-0")
    assert str(v) == "ERROR   CORRUPT_BATCH: /d/a.log @ byte 61: bad crc"
    assert str(Finding(message="retired", file="/d/bootstrap.checkpoint")) == "/d/bootstrap.checkpoint: retired"
    assert str(Finding(message="no result", position=3)) == "byte 3: no result"
    assert str(Finding(message="plain", code="NO_RESULT")) == "NO_RESULT: plain"


def test_of_error_keeps_file_position_and_expectation() -> None:
    exc = CorruptRecordError("CRC mismatch", position=17, expected=1, found=2)
    f = Finding.of_error(exc, FindingCode.CHECKPOINT_CORRUPT, file=Path("/d/z.checkpoint"), severity="error")
    assert (f.file, f.position, f.code, f.severity) == ("/d/z.checkpoint", 17, "CHECKPOINT_CORRUPT", "error")
    assert f.message == "CRC mismatch (expected 1, found 2)"
    located = CorruptRecordError("short", path="/d/own.log")
    assert Finding.of_error(located, file="/d/other.log").file == "/d/own.log"
    assert Finding.of_error(CorruptRecordError("short")).file is None


def test_codes_are_one_vocabulary() -> None:
    f = Finding(message="m", code="timeindex-empty")  # as reports and validate --json spelled it before
    assert f.code is FindingCode.TIMEINDEX_EMPTY
    assert Finding(message="m", code="missing").code is FindingCode.MISSING
    with pytest.raises(ValidationError):
        Finding(message="m", code="NOT_A_CODE")
    with pytest.raises(ValidationError):
        Finding(message="m", path="/d/a.log")  # the field is ``file``: unknown keys are errors
    assert all(m.value == m.name and m.meaning for m in FindingCode)


def test_every_snapshot_rule_has_both_codes() -> None:
    """kraft_validate names a rule once (``_code(kind, "FOOTER")``) for KRaft snapshots and for
    bootstrap.checkpoint: both codes must exist, else it raises instead of reporting."""
    source = (ROOT / "migration/logdir/kraft_validate.py").read_text()
    rules = set(re.findall(r'_code\(kind, "([A-Z_]+)"\)', source))
    assert len(rules) >= 18
    for rule in rules:
        assert FindingCode(f"CHECKPOINT_{rule}") and FindingCode(f"BOOTSTRAP_{rule}")


def test_every_code_the_package_spells_is_in_the_vocabulary() -> None:
    """Code literals given to findings across the package (``code="..."``, ``"code": "..."``,
    ``*_CODE = "..."``, the tier's ``_NotStageable("...")``) and the members they name
    (``FindingCode.X``, which mypy checks too) are members: a misspelt or kebab-case one fails
    here, not in a run."""
    pattern = re.compile(r'(?:\bcode=|"code": |_CODE = |_NotStageable\()"([^"]*)"|\bFindingCode\.([A-Z][A-Z0-9_]*)\b')
    spelled = {(str(p.relative_to(ROOT)), m) for p in (ROOT / "migration").rglob("*.py")
               for m in map("".join, pattern.findall(p.read_text()))}
    assert len(spelled) >= 20
    assert [(p, c) for p, c in sorted(spelled) if c not in FindingCode.__members__] == []


def test_operations_doc_lists_every_code_with_its_meaning() -> None:
    doc = (ROOT / "docs/operations.md").read_text()
    section = doc.split("### Finding codes", 1)[1]
    rows = dict(re.findall(r"^\| `([A-Z_]+)` \| (.+) \|$", section, flags=re.MULTILINE))
    assert rows == {m.value: m.meaning for m in FindingCode}
