"""Test inputs for bootstrap unification, built without the code under test.

Data batches come from kafka-python's ``DefaultRecordBatchBuilder``; control batches, KRaft
control record bodies and metadata record frames from the small encoder below (written from
docs/formats.md §2, §6, §7, not from ``migration.formats``). Files are decoded back with
kafka-python's ``MemoryRecords``.
"""

from __future__ import annotations

import hashlib
import os
import random
import struct
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from kafka.record.util import calc_crc32c

T_FORMAT = 1_700_000_000_000  # ms: when "kafka-storage format" ran
NODE_ID = 3000
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
METADATA_DIR = "__cluster_metadata-0"
ZERO = "00000000000000000000-0000000000.checkpoint"
SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION, KRAFT_VOTERS = 3, 4, 5, 6


# ------------------------------------------------------------------ primitives


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def varint(n: int) -> bytes:
    return uvarint((n << 1) ^ (n >> 63))


def compact_bytes(b: bytes) -> bytes:
    return uvarint(len(b) + 1) + b


def compact_str(s: str) -> bytes:
    return compact_bytes(s.encode())


# ------------------------------------------------------------------ record values


def header_value(ts: int) -> bytes:
    return struct.pack(">hq", 0, ts) + b"\x00"


def footer_value() -> bytes:
    return b"\x00\x00\x00"


def kraft_version_value(level: int) -> bytes:
    return struct.pack(">hh", 0, level) + b"\x00"


def voters_value(voters: list[tuple[int, bytes, list[tuple[str, str, int]]]]) -> bytes:
    out = struct.pack(">h", 0) + uvarint(len(voters) + 1)
    for voter_id, dir_id, endpoints in voters:
        out += struct.pack(">i", voter_id) + dir_id + uvarint(len(endpoints) + 1)
        for name, host, port in endpoints:
            out += compact_str(name) + compact_str(host) + struct.pack(">H", port) + b"\x00"
        out += struct.pack(">hh", 0, 1) + b"\x00"  # KRaftVersionFeature (0, 1) + its tags
        out += b"\x00"  # voter tags
    return out + b"\x00"


def feature_level(name: str, level: int) -> bytes:
    return uvarint(1) + uvarint(12) + uvarint(0) + compact_str(name) + struct.pack(">h", level) + b"\x00"


def scram_record(name: str, mechanism: int, salt: bytes, stored_key: bytes, server_key: bytes,
                 iterations: int = 8192) -> bytes:
    return (uvarint(1) + uvarint(11) + uvarint(0) + compact_str(name) + struct.pack(">b", mechanism)
            + compact_bytes(salt) + compact_bytes(stored_key) + compact_bytes(server_key)
            + struct.pack(">i", iterations) + b"\x00")


# ------------------------------------------------------------------ batches


def control_batch(records: list[tuple[int, bytes]], base_offset: int, *, epoch: int = 0, ts: int = T_FORMAT) -> bytes:
    body = b""
    for i, (ctype, value) in enumerate(records):
        key = struct.pack(">hh", 0, ctype)
        rec = b"\x00" + varint(0) + varint(i) + varint(len(key)) + key + varint(len(value)) + value + varint(0)
        body += varint(len(rec)) + rec
    after_crc = struct.pack(">hiqqqhii", 0x20, len(records) - 1, ts, ts, -1, -1, -1, len(records)) + body
    crc = calc_crc32c(after_crc)
    length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", base_offset, length, epoch, 2, crc) + after_crc


def data_batch(values: list[bytes], base_offset: int, *, epoch: int = 0, ts: int = T_FORMAT) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i, v in enumerate(values):
        assert b.append(i, timestamp=ts, key=None, value=v, headers=[]) is not None
    buf = bytearray(b.build())
    # Base offset and leader epoch lie outside the CRC: a broker sets them, so do we.
    struct.pack_into(">q", buf, 0, base_offset)
    struct.pack_into(">i", buf, 12, epoch)
    return bytes(buf)


def checkpoint(values: list[bytes], *, kraft: list[tuple[int, bytes]] = (), header_ts: int = T_FORMAT,  # type: ignore[assignment]
               epoch: int = 0, ts: int = T_FORMAT, split: int | None = None) -> bytes:
    """A snapshot: header batch (+ KRaft records), data batch(es) of ``split`` records, footer."""
    head = [(SNAPSHOT_HEADER, header_value(header_ts)), *kraft]
    out = control_batch(head, 0, epoch=epoch, ts=ts)
    offset = len(head)
    step = split or max(len(values), 1)
    for i in range(0, len(values), step):
        chunk = values[i:i + step]
        out += data_batch(chunk, offset, epoch=epoch, ts=ts)
        offset += len(chunk)
    return out + control_batch([(SNAPSHOT_FOOTER, footer_value())], offset, epoch=epoch, ts=ts)


def bootstrap(values: list[bytes], **kw: object) -> bytes:
    """bootstrap.checkpoint as BatchFileWriter writes it: header timestamp 0, no KRaft records."""
    return checkpoint(values, header_ts=0, **kw)  # type: ignore[arg-type]


# ------------------------------------------------------------------ decoding


@dataclass
class Decoded:
    batches: list[dict] = field(default_factory=list)
    control: list[tuple[int, int, bytes]] = field(default_factory=list)  # (offset, type, value)
    data: list[tuple[int, bytes]] = field(default_factory=list)  # (offset, value)


def decode(data: bytes) -> Decoded:
    """Decode a checkpoint with kafka-python, checking every CRC."""
    out = Decoded()
    mr = MemoryRecords(data)
    while mr.has_next():
        b = mr.next_batch()
        assert b.validate_crc()
        out.batches.append({"base_offset": b.base_offset, "control": b.is_control_batch,
                            "epoch": b.leader_epoch, "compression": b.compression_type,
                            "size": b.size_in_bytes if hasattr(b, "size_in_bytes") else None})
        for r in b:
            if b.is_control_batch:
                assert r.key[:2] == b"\x00\x00"
                out.control.append((r.offset, r.type, bytes(r.value)))
            else:
                assert r.key is None
                out.data.append((r.offset, bytes(r.value)))
    return out


# ------------------------------------------------------------------ directories


@dataclass
class Secrets:
    values: list[bytes]

    def encodings(self) -> list[str]:
        import base64

        out = []
        for v in self.values:
            out += [v.hex(), v.hex().upper(), base64.b64encode(v).decode(), base64.b64encode(v).decode().rstrip("="),
                    base64.urlsafe_b64encode(v).decode().rstrip("="), repr(v)[2:-1], v[:8].hex()]
        return out


def scram_users(seed: int = 11) -> tuple[list[bytes], Secrets]:
    rng = random.Random(seed)
    records, secrets = [], []
    for user, mech in (("admin", 2), ("alice", 1)):
        salt, stored, server = rng.randbytes(24), rng.randbytes(32 * mech), rng.randbytes(32 * mech)
        records.append(scram_record(user, mech, salt, stored, server))
        secrets += [salt, stored, server]
    return records, Secrets(secrets)


def bootstrap_values(mv: int = 21, seed: int = 11) -> tuple[list[bytes], Secrets]:
    users, secrets = scram_users(seed)
    return [feature_level("metadata.version", mv), feature_level("group.version", 1), *users], secrets


def default_voters() -> bytes:
    return voters_value([(NODE_ID, bytes(range(16)), [("CONTROLLER", "controller-1", 9093)])])


def make_metadata_dir(root: Path, *, boot: bytes | None = None, zero: bytes | None = None,
                      snapshots: dict[str, bytes] | None = None, segments: dict[int, bytes] | None = None) -> Path:
    """A controller's metadata log dir: meta.properties, .lock, bootstrap.checkpoint, and
    __cluster_metadata-0 with the zero checkpoint, other snapshots and segments."""
    root.mkdir(parents=True)
    (root / "meta.properties").write_text(f"#\nversion=1\ncluster.id={CLUSTER_ID}\nnode.id={NODE_ID}\n")
    (root / ".lock").touch()
    if boot is not None:
        (root / "bootstrap.checkpoint").write_bytes(boot)
    m = root / METADATA_DIR
    m.mkdir()
    if zero is not None:
        (m / ZERO).write_bytes(zero)
        os.chmod(m / ZERO, 0o444)
    for name, data in (snapshots or {}).items():
        (m / name).write_bytes(data)
    for base, data in (segments or {}).items():
        (m / f"{base:020d}.log").write_bytes(data)
    return root


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under root with its content hash and mode: 'nothing changed' checks."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest() + oct(p.stat().st_mode)
    return out


@pytest.fixture(autouse=True)
def _isolated_out(tmp_path, monkeypatch):
    """Run records, reports and default backups under the test's tmp dir."""
    monkeypatch.setenv("KMIGRATE_OUT", str(tmp_path / "out"))
    monkeypatch.setenv("KMIGRATE_REPORT_ROOT", str(tmp_path / "out" / "reports"))
    monkeypatch.setenv("KMIGRATE_BACKUP_ROOT", str(tmp_path / "backups"))
    monkeypatch.delenv("KMIGRATE_FAULT_AT", raising=False)


@pytest.fixture
def kraft() -> SimpleNamespace:
    """The test-only encoder/decoder as one namespace (tests import nothing from here:
    pytest runs with --import-mode=importlib)."""
    return SimpleNamespace(**{name: obj for name, obj in globals().items()
                              if not name.startswith("_") and (callable(obj) or name.isupper())})
