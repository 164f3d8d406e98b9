from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from migration.formats.clean_shutdown import CleanShutdownFile
from migration.formats.errors import CorruptCheckpointError


def test_exact_bytes() -> None:
    assert CleanShutdownFile(123).to_bytes() == b'{"version":0,"brokerEpoch":123}'
    assert CleanShutdownFile.from_bytes(b'{"version":0,"brokerEpoch":123}') == CleanShutdownFile(123)


@given(st.integers(-(2**63), 2**63 - 1))
def test_round_trip(epoch: int) -> None:
    f = CleanShutdownFile(epoch)
    assert CleanShutdownFile.from_bytes(f.to_bytes()) == f


def test_legacy_empty_marker_and_lenient_fields() -> None:
    assert CleanShutdownFile.from_bytes(b"").broker_epoch is None
    assert CleanShutdownFile.from_bytes(b"{}").broker_epoch is None
    assert CleanShutdownFile.from_bytes(b'{"brokerEpoch":null}').broker_epoch is None
    # Unknown properties are ignored, as Jackson is configured to.
    assert CleanShutdownFile.from_bytes(b' {"brokerEpoch": 7, "other": [1]}\n').broker_epoch == 7


@pytest.mark.parametrize(
    ("data", "position"),
    [
        (b'{"version":0,"brokerEpoch":', 27),
        (b"garbage", 0),
        (b"[1, 2]", 0),
        (b'{"brokerEpoch":"12"}', 0),
        (b'{"brokerEpoch":true}', 0),
        (b'{"brokerEpoch":9223372036854775808}', 0),
        (b'{"version":"0","brokerEpoch":1}', 0),
        (b'{"brokerEpoch":1}\xff', 17),
    ],
)
def test_bad_content(data: bytes, position: int) -> None:
    with pytest.raises(CorruptCheckpointError) as e:
        CleanShutdownFile.from_bytes(data, path="/logs/.kafka_cleanshutdown")
    assert e.value.path == "/logs/.kafka_cleanshutdown" and e.value.position == position


def test_write_and_read(tmp_path: Path) -> None:
    path = tmp_path / ".kafka_cleanshutdown"
    CleanShutdownFile(42).write(path)
    assert path.read_bytes() == b'{"version":0,"brokerEpoch":42}'
    assert CleanShutdownFile.read(path).broker_epoch == 42
    with pytest.raises(ValueError):
        CleanShutdownFile(2**63).write(tmp_path / "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".kafka_cleanshutdown"]


@pytest.mark.parametrize(
    "data",
    [
        b"[" * 100_000,  # nesting deeper than the interpreter's stack: RecursionError
        b'{"version":{"version":' * 5000 + b"0" + b"}}" * 5000,
        b'{"version":0,"brokerEpoch":' + b"1" * 5000 + b"}",  # more digits than int() reads: ValueError
    ],
    ids=["deep-array", "deep-object", "long-number"],
)
def test_json_the_reader_cannot_hold_is_a_format_error(data: bytes) -> None:
    # Found by tests/fuzz: RecursionError and ValueError escaped the reader.
    with pytest.raises(CorruptCheckpointError) as e:
        CleanShutdownFile.from_bytes(data, path="/logs/.kafka_cleanshutdown")
    assert e.value.path == "/logs/.kafka_cleanshutdown" and e.value.position == 0
