"""``kmigrate inspect`` prints what kafka-dump-log prints.

Expected lines follow the format of Kafka's ``DumpLogSegments.java`` (tools module; before 4.0
``DumpLogSegments.scala`` in core): ``printBatchLevel``, ``printRecordMetadata``,
``printControlRecord``, ``dumpIndex``, ``dumpTimeIndex``, ``dumpTxnIndex``,
``dumpProducerIdSnapshot``, the generated ``*JsonConverter`` classes for KRaft records and the
coordinator-record parsers ``OffsetsMessageParser`` / ``TransactionLogMessageParser``, whose
expected keys and payloads are the strings of Kafka's ``DumpLogSegmentsTest`` (docs/formats.md §8,
§8.1). Batch header values and CRCs in the expected lines are read from the input bytes here with
``struct``, ``zlib`` and ``crc32c``, not through the readers under test; some inputs come from
kafka-python, an independent writer. The shape checks at the end port the ones
of Kafka's ``DumpLogSegmentsTest`` (record/batch line prefixes and suffixes, field parsing,
``--max-bytes``).

The lines of v0, v1 and v2 segments (compressed, transactional, control batches), indexes, time
indexes, transaction indexes, producer snapshots and KRaft files are no longer pinned here by
hand: tests/realkafka/test_dump_log_parity.py compares them with the real kafka-dump-log's
(Kafka 4.1.2 and 4.4.0), computed at test time on the same kinds of files.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import crc32c
import pytest
from kafka.protocol.old.consumer_protocol import ConsumerProtocolMemberAssignment_v0, ConsumerProtocolMemberMetadata_v0
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from typer.testing import CliRunner

from migration.cli.app import app
from migration.formats.control_records import (
    ControlRecordType,
    EndTransactionMarker,
    encode_control_key,
    encode_control_value,
    kraft_version_value,
)
from migration.formats.coordinator_records import (
    Coordinator,
    encode_consumer_protocol,
    encode_coordinator_key,
    encode_coordinator_value,
)
from migration.formats.kraft_checkpoint import build_checkpoint
from migration.formats.metadata_records import encode_metadata_record
from migration.formats.model import Compression, Header, Record, TimestampType
from migration.formats.offset_index import OffsetIndex
from migration.formats.producer_snapshot import ProducerSnapshot, ProducerSnapshotEntry
from migration.formats.record_batch import build_record_batch
from migration.formats.time_index import TimeIndex
from migration.formats.transaction_index import AbortedTxn, TransactionIndex
from migration.logdir.inspect import DumpOptions, LogDump, PayloadDecoder

runner = CliRunner()
TOPIC_ID = "AAECAwQFBgcICQoLDA0ODw"  # Uuid.toString of bytes 0..15
KMIGRATE = Path(sys.executable).parent / "kmigrate"


def dump(*paths: Path, **options: object) -> tuple[list[str], list[str], int]:
    """(stdout lines, stderr lines, files that failed) as the text output has them."""
    d = LogDump(DumpOptions(**options))  # type: ignore[arg-type]
    out: list[str] = []
    err: list[str] = []
    for line in d.dump([str(p) for p in paths]):
        if line.text is not None:
            (err if line.err else out).append(line.text)
    return out, err, d.errors


def v2_batch_line(data: bytes, at: int) -> str:
    """printBatchLevel for the v2 batch at ``at``, its header read with struct."""
    (base, length, ple, magic, crc, attrs, lod, base_ts, max_ts, pid, epoch, seq,
     count) = struct.unpack_from(">qiibIhiqqqhii", data, at)
    size = 12 + length
    assert crc == crc32c.crc32c(data[at + 21 : at + size])
    ts_type = "LogAppendTime" if attrs & 0x08 else "CreateTime"
    codec = ["none", "gzip", "snappy", "lz4", "zstd"][attrs & 0x07]
    horizon = f"OptionalLong[{base_ts}]" if attrs & 0x40 else "OptionalLong.empty"
    last_seq = -1 if seq == -1 else seq + lod
    return (f"baseOffset: {base} lastOffset: {base + lod} count: {count} baseSequence: {seq} lastSequence: {last_seq}"
            f" producerId: {pid} producerEpoch: {epoch} partitionLeaderEpoch: {ple}"
            f" isTransactional: {str(bool(attrs & 0x10)).lower()} isControl: {str(bool(attrs & 0x20)).lower()}"
            f" deleteHorizonMs: {horizon} position: {at} {ts_type}: {max_ts} size: {size} magic: {magic}"
            f" compresscodec: {codec} crc: {crc} isvalid: true")


def v2_lines(data: bytes) -> list[str]:
    out, at = [], 0
    while at < len(data):
        out.append(v2_batch_line(data, at))
        at += 12 + struct.unpack_from(">i", data, at + 8)[0]
    return out


def legacy_crc(magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None) -> int:
    """CRC-32 of one v0/v1 message written out by hand (docs/formats.md §1)."""
    body = struct.pack(">bb", magic, attributes) + (struct.pack(">q", timestamp) if magic == 1 else b"")
    for blob in (key, value):
        body += struct.pack(">i", -1) if blob is None else struct.pack(">i", len(blob)) + blob
    return zlib.crc32(body)


def metadata_value(name: str, version: int, fields: dict) -> bytes:
    return encode_metadata_record(name, version, fields)


# ------------------------------------------------------------------ .log: v0, v1, v2


def _transactional_segment() -> bytes:
    producer = {"producer_id": 4711, "producer_epoch": 3, "is_transactional": True, "partition_leader_epoch": 5}
    commit = EndTransactionMarker(ControlRecordType.COMMIT, 100)
    abort = EndTransactionMarker(ControlRecordType.ABORT, 101)
    return b"".join([
        build_record_batch([Record(0, 1000, b"k0", b"v0", (Header("trace", b"t"), Header("span", None))),
                            Record(1, 1005, b"k1", b"\xff1", ())], base_sequence=17, **producer),
        build_record_batch([Record(2, 1010, commit.encode_key(), commit.encode_value())], is_control=True, **producer),
        build_record_batch([Record(3, 1020, None, b"v3"), Record(4, 1021, b"k4", b"v4")], base_sequence=19,
                           compression=Compression.GZIP, **producer),
        build_record_batch([Record(5, 1030, abort.encode_key(), abort.encode_value())], is_control=True, **producer),
        build_record_batch([Record(6, 1040, b"k6", b"v6")], timestamp_type=TimestampType.LOG_APPEND_TIME,
                           max_timestamp=9999),
        build_record_batch([Record(7, 1050, b"k7", None)], delete_horizon_ms=86_400_000),
    ])


def test_decoders_and_skip_record_metadata(tmp_path):
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(build_record_batch([Record(0, 1, b"\x00\x01", b'{"a": [1, 2]}'), Record(1, 2, b"k", b"{oops")]))
    out = dump(seg, key_decoder=PayloadDecoder.HEX, value_decoder=PayloadDecoder.JSON, print_data_log=True)[0]
    assert out[3].endswith("headerKeys: [] key: 0001 payload: {\"a\":[1,2]}")
    assert out[4].endswith("headerKeys: [] key: Error at offset 1, skipping. not JSON: Expecting property name"
                           " enclosed in double quotes: line 1 column 2 (char 1)")
    out = dump(seg, print_data_log=True, skip_record_metadata=True)[0]
    assert out[3:] == ['| key: \x00\x01 payload: {"a": [1, 2]}', "| key: k payload: {oops"]
    out = dump(seg, deep_iteration=True, skip_record_metadata=True)[0]
    assert out[3:] == ["", ""]  # Kafka prints an empty line per record


def test_non_consecutive_offsets_are_listed_after_the_last_file(tmp_path):
    compacted = build_record_batch([Record(0, 1, b"a", b"1"), Record(2, 2, b"b", b"2")]) + build_record_batch(
        [Record(3, 3, b"c", b"3"), Record(7, 4, b"d", b"4")])
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(compacted)
    assert dump(seg)[1] == []  # shallow: records are not looked at
    out, err, errors = dump(seg, deep_iteration=True)
    assert [line.split(" CreateTime")[0] for line in out if line.startswith("|")] == [
        "| offset: 0", "| offset: 2", "| offset: 3", "| offset: 7"]
    assert err == [f"Non-consecutive offsets in {seg}", "  0 is followed by 2", "  3 is followed by 7"]
    assert errors == 0


def test_empty_segment_prints_its_header_lines_with_newlines(tmp_path):
    seg = tmp_path / "00000000000000000100.log"
    seg.write_bytes(b"")
    assert dump(seg) == ([f"Dumping {seg}", "Log starting offset: 100"], [], 0)
    res = runner.invoke(app, ["inspect", str(seg)])
    assert res.exit_code == 0
    assert res.stdout == f"Dumping {seg}\nLog starting offset: 100\n"


def test_truncated_tail_and_max_bytes(tmp_path):
    data = _transactional_segment()
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(data + data[:20])
    out, err, errors = dump(seg)
    assert out[2:] == v2_lines(data) + [f"Found 20 invalid bytes at the end of {seg.name}"]
    assert (err, errors) == ([], 0)
    first_two = 12 + struct.unpack_from(">i", data, 8)[0]
    first_two += 12 + struct.unpack_from(">i", data, first_two + 8)[0]
    out = dump(seg, max_bytes=first_two + 10)[0]
    assert out[2:] == v2_lines(data)[:2]  # no "Found ... invalid bytes" with --max-bytes


# ------------------------------------------------------------------ KRaft: metadata log and snapshots


def test_metadata_segment_records_as_kafka_json(tmp_path):
    d = tmp_path / "__cluster_metadata-0"
    d.mkdir()
    leader_change = encode_control_value(ControlRecordType.LEADER_CHANGE, {
        "Version": 0, "LeaderId": 3000, "Voters": [{"VoterId": 3000}], "GrantingVoters": [{"VoterId": 3000}]})
    values = [
        metadata_value("FeatureLevelRecord", 0, {"Name": "metadata.version", "FeatureLevel": 21}),
        metadata_value("TopicRecord", 0, {"Name": "orders", "TopicId": TOPIC_ID}),
        metadata_value("PartitionChangeRecord", 0, {"PartitionId": 0, "TopicId": TOPIC_ID, "Isr": [1, 2],
                                                    "Leader": 2}),
        metadata_value("ClientQuotaRecord", 0, {"Entity": [{"EntityType": "user", "EntityName": "alice"}],
                                                "Key": "producer_byte_rate", "Value": 1048576.0, "Remove": False}),
        metadata_value("ClientQuotaRecord", 0, {"Entity": [{"EntityType": "client-id", "EntityName": None}],
                                                "Key": "request_percentage", "Value": 1.5e7, "Remove": True}),
        metadata_value("UserScramCredentialRecord", 0, {"Name": "admin", "Mechanism": 1, "Salt": b"s" * 24,
                                                        "StoredKey": b"k" * 32, "ServerKey": b"v" * 32,
                                                        "Iterations": 4096}),
        bytes.fromhex("904e904e"),  # DumpLogSegmentsTest's bogus record: two uvarints 10000
    ]
    data = (build_record_batch([Record(0, 7000, encode_control_key(ControlRecordType.LEADER_CHANGE), leader_change)],
                               is_control=True, partition_leader_epoch=1)
            + build_record_batch([Record(1 + i, 7001, None, v) for i, v in enumerate(values)],
                                 partition_leader_epoch=1))
    seg = d / "00000000000000000000.log"
    seg.write_bytes(data)
    b = v2_lines(data)
    out, err, errors = dump(seg, deep_iteration=True)
    meta = "CreateTime: 7001 keySize: -1 valueSize: {} sequence: -1 headerKeys: [] payload: "
    assert out == [
        f"Dumping {seg}",
        "Log starting offset: 0",
        b[0],
        f"| offset: 0 CreateTime: 7000 keySize: 4 valueSize: {len(leader_change)} sequence: -1 headerKeys: []"
        ' LeaderChange: {"version":0,"leaderId":3000,"voters":[{"voterId":3000}],"grantingVoters":[{"voterId":3000}]}',
        b[1],
        f"| offset: 1 {meta.format(len(values[0]))}"
        '{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version","featureLevel":21}}',
        f"| offset: 2 {meta.format(len(values[1]))}"
        f'{{"type":"TOPIC_RECORD","version":0,"data":{{"name":"orders","topicId":"{TOPIC_ID}"}}}}',
        f"| offset: 3 {meta.format(len(values[2]))}"  # tagged fields at their default are left out
        f'{{"type":"PARTITION_CHANGE_RECORD","version":0,"data":{{"partitionId":0,"topicId":"{TOPIC_ID}",'
        '"isr":[1,2],"leader":2}}',
        f"| offset: 4 {meta.format(len(values[3]))}"
        '{"type":"CLIENT_QUOTA_RECORD","version":0,"data":{"entity":[{"entityType":"user","entityName":"alice"}],'
        '"key":"producer_byte_rate","value":1048576.0,"remove":false}}',
        f"| offset: 5 {meta.format(len(values[4]))}"
        '{"type":"CLIENT_QUOTA_RECORD","version":0,"data":{"entity":[{"entityType":"client-id","entityName":null}],'
        '"key":"request_percentage","value":1.5E7,"remove":true}}',
        f"| offset: 6 {meta.format(len(values[5]))}"
        '{"type":"USER_SCRAM_CREDENTIAL_RECORD","version":0,"data":{"name":"admin","mechanism":1,'
        '"salt":"<redacted 24 bytes>","storedKey":"<redacted 32 bytes>","serverKey":"<redacted 32 bytes>",'
        '"iterations":4096}}',
        f"| offset: 7 {meta.format(4)}Error at 7, skipping. unknown metadata record frame version 10000"
        " (expected frame version 1, found 10000)",
    ]
    assert (err, errors) == ([], 0)
    # shallow, Kafka's default: batches only
    assert dump(seg)[0] == out[:3] + out[4:5]
    # Kafka's test: --cluster-metadata-decoder --skip-record-metadata still shows the records
    out = dump(seg, cluster_metadata_decoder=True, skip_record_metadata=True)[0]
    assert out[3] == "" and out[5].startswith('| payload: {"type":"FEATURE_LEVEL_RECORD"')
    # a decoder given explicitly wins over the automatic one
    out = dump(seg, print_data_log=True, value_decoder=PayloadDecoder.HEX)[0]
    assert out[5].endswith(f"headerKeys: [] payload: {values[0].hex()}")
    # a copy outside __cluster_metadata-0 needs the decoder asked for, as with Kafka
    copy = tmp_path / "00000000000000000000.log"
    copy.write_bytes(data)
    assert "TOPIC_RECORD" not in "\n".join(dump(copy, print_data_log=True)[0])
    assert "TOPIC_RECORD" in "\n".join(dump(copy, cluster_metadata_decoder=True)[0])


def _voters() -> bytes:
    return encode_control_value(ControlRecordType.KRAFT_VOTERS, {"Version": 0, "Voters": [{
        "VoterId": 3000, "VoterDirectoryId": TOPIC_ID,
        "Endpoints": [{"Name": "CONTROLLER", "Host": "ctl", "Port": 9093}],
        "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 1}}]})


def test_snapshot_checkpoint(tmp_path):
    records = [
        metadata_value("RegisterBrokerRecord", 0, {
            "BrokerId": 1, "IncarnationId": TOPIC_ID, "BrokerEpoch": 10,
            "EndPoints": [{"Name": "PLAINTEXT", "Host": "b1", "Port": 9092, "SecurityProtocol": 0}],
            "Features": [], "Rack": None, "Fenced": True}),
        metadata_value("TopicRecord", 0, {"Name": "test-topic", "TopicId": TOPIC_ID}),
    ]
    data = build_checkpoint(records, header_timestamp=10000, append_time=20000, epoch=2,
                            kraft_records=[(ControlRecordType.KRAFT_VERSION, kraft_version_value(1)),
                                           (ControlRecordType.KRAFT_VOTERS, _voters())])
    snap = tmp_path / "00000000000000000005-0000000002.checkpoint"
    snap.write_bytes(data)
    b = v2_lines(data)
    rec = "CreateTime: 20000 keySize: {} valueSize: {} sequence: -1 headerKeys: []"
    out, err, errors = dump(snap)  # a snapshot is dumped deep, with the metadata decoder
    assert out == [
        f"Dumping {snap}",
        "Snapshot end offset: 5, epoch: 2",
        b[0],
        f'| offset: 0 {rec.format(4, 11)} SnapshotHeader {{"version":0,"lastContainedLogTimestamp":10000}}',
        f'| offset: 1 {rec.format(4, 5)} KRaftVersion {{"version":0,"kRaftVersion":1}}',
        f"| offset: 2 {rec.format(4, len(_voters()))} KRaftVoters "
        f'{{"version":0,"voters":[{{"voterId":3000,"voterDirectoryId":"{TOPIC_ID}","endpoints":[{{"name":"CONTROLLER",'
        '"host":"ctl","port":9093}],"kRaftVersionFeature":{"minSupportedVersion":0,"maxSupportedVersion":1}}]}',
        b[1],
        f"| offset: 3 {rec.format(-1, len(records[0]))} payload: "
        f'{{"type":"REGISTER_BROKER_RECORD","version":0,"data":{{"brokerId":1,"incarnationId":"{TOPIC_ID}",'
        '"brokerEpoch":10,"endPoints":[{"name":"PLAINTEXT","host":"b1","port":9092,"securityProtocol":0}],'
        '"features":[],"rack":null,"fenced":true}}',
        f"| offset: 4 {rec.format(-1, len(records[1]))} payload: "
        f'{{"type":"TOPIC_RECORD","version":0,"data":{{"name":"test-topic","topicId":"{TOPIC_ID}"}}}}',
        b[2],
        f'| offset: 5 {rec.format(4, 3)} SnapshotFooter {{"version":0}}',
    ]
    assert " partitionLeaderEpoch: 2 " in b[0] and " isControl: true " in b[0]
    assert (err, errors) == ([], 0)
    boot = tmp_path / "bootstrap.checkpoint"
    boot.write_bytes(data)
    assert dump(boot)[0][:2] == [f"Dumping {boot}", "KRaft bootstrap snapshot"]


# ------------------------------------------------------------------ __consumer_offsets, __transaction_state
#
# Expected keys and payloads are DumpLogSegmentsTest's (testOffsetsMessageParser,
# testTransactionLogMessageParser): the same messages built here, the same JSON strings expected.
# The lines around them are DumpLogSegments' printRecordMetadata and printRecordContents.

GROUP, TXN = Coordinator.GROUP, Coordinator.TRANSACTION
SUBSCRIPTION, ASSIGNMENT = "ConsumerProtocolSubscription", "ConsumerProtocolAssignment"


def _group_metadata(subscription: bytes, assignment: bytes) -> dict:
    """DumpLogSegmentsTest's GroupMetadataValue: one member of a "consumer" group."""
    return {"protocolType": "consumer", "generation": 10, "protocol": "range", "leader": "member", "members": [{
        "memberId": "member", "groupInstanceId": "instance", "clientId": "client", "clientHost": "host",
        "rebalanceTimeout": 1000, "sessionTimeout": 100, "subscription": subscription, "assignment": assignment}]}


def _record_lines(entries: list[tuple[bytes | None, bytes | None]], tails: list[str]) -> list[str]:
    """``| offset: N CreateTime: …`` with each record's sizes, then the tail Kafka prints after them."""
    out = []
    for offset, ((key, value), tail) in enumerate(zip(entries, tails, strict=True)):
        ks, vs = -1 if key is None else len(key), -1 if value is None else len(value)
        out.append(f"| offset: {offset} CreateTime: {1000 + offset} keySize: {ks} valueSize: {vs} sequence: -1"
                   f" headerKeys: []{tail}")
    return out


def test_consumer_offsets_records_as_kafka_json(tmp_path):
    """``--offsets-decoder`` (OffsetsMessageParser in DumpLogSegments.java), picked without asking
    for a segment of ``__consumer_offsets-N``."""
    d = tmp_path / "__consumer_offsets-7"
    d.mkdir()
    subscription = encode_consumer_protocol(SUBSCRIPTION, 3, {  # ConsumerProtocol.serializeSubscription
        "Topics": ["foo"], "UserData": None, "OwnedPartitions": [{"Topic": "foo", "Partitions": [0]}],
        "GenerationId": 0, "RackId": "rack"})
    assignment = encode_consumer_protocol(ASSIGNMENT, 3, {"AssignedPartitions": [{"Topic": "foo", "Partitions": [0]}],
                                                          "UserData": None})
    group_key = encode_coordinator_key(GROUP, 3, {"GroupId": "group"})
    classic_key = encode_coordinator_key(GROUP, 2, {"group": "group"})
    assert group_key == b"\x00\x03\x00\x05group" and classic_key == b"\x00\x02\x00\x05group"
    entries = [
        (group_key, encode_coordinator_value(GROUP, 3, 0, {"Epoch": 10})),
        (classic_key, encode_coordinator_value(GROUP, 2, 4, _group_metadata(subscription, assignment))),
        (classic_key, encode_coordinator_value(GROUP, 2, 4, _group_metadata(b"Subscription", b"Assignment"))),
        (group_key, None),  # a tombstone
        (struct.pack(">h", 32767), b""),  # a record type this Kafka does not know
        # DumpLogSegmentsTest's "any parsing error": a ConsumerGroupMemberMetadataValue with every
        # field at its default, under a ConsumerGroupMetadataKey
        (group_key, encode_coordinator_value(GROUP, 5, 0, {})),
    ]
    assert entries[5][1] == bytes.fromhex("0000" "01010101" "01" "01" "ffffffff" "01" "00")
    data = build_record_batch([Record(i, 1000 + i, k, v) for i, (k, v) in enumerate(entries[:3])]) + \
        build_record_batch([Record(i, 1000 + i, k, v) for i, (k, v) in enumerate(entries[3:], start=3)],
                           compression=Compression.GZIP)
    seg = d / "00000000000000000000.log"
    seg.write_bytes(data)
    b = v2_lines(data)
    group_json = '{"type":"2","data":{"group":"group"}}'
    member = ('"leader":"member","currentStateTimestamp":-1,"members":[{"memberId":"member",'
              '"groupInstanceId":"instance","clientId":"client","clientHost":"host",'
              '"rebalanceTimeout":1000,"sessionTimeout":100,')
    tails = [
        ' key: {"type":"3","data":{"groupId":"group"}} payload: {"version":"0","data":{"epoch":10}}',
        f' key: {group_json} payload: {{"version":"4","data":{{"protocolType":"consumer","generation":10,'
        f'"protocol":"range",{member}"subscription":{{"topics":["foo"],"userData":null,"ownedPartitions":'
        '[{"topic":"foo","partitions":[0]}],"generationId":0,"rackId":"rack"},"assignment":{"assignedPartitions":'
        '[{"topic":"foo","partitions":[0]}],"userData":null}}]}}',
        # not a consumer protocol message ("Su" is no version): the bytes stay, as base64
        f' key: {group_json} payload: {{"version":"4","data":{{"protocolType":"consumer","generation":10,'
        f'"protocol":"range",{member}"subscription":"U3Vic2NyaXB0aW9u","assignment":"QXNzaWdubWVudA=="}}]}}}}',
        ' key: {"type":"3","data":{"groupId":"group"}} payload: <DELETE>',
        " key: Unknown record type 32767 at offset 4, skipping.",
        # Kafka: "Error reading byte array of 536870911 byte(s): only 1 byte(s) available."
        f" key: Error at offset 5, skipping. {seg}: the batch at byte {12 + struct.unpack_from('>i', data, 8)[0]},"
        " value byte 13: ConsumerGroupMetadataValue: data ends inside tagged field 1"
        " (expected 536870911 byte(s) for tagged field 1, found 1 byte(s))",
    ]
    out, err, errors = dump(seg, deep_iteration=True)
    lines = _record_lines(entries, tails)
    assert out == [f"Dumping {seg}", "Log starting offset: 0", b[0], *lines[:3], b[1], *lines[3:]]
    assert (err, errors) == ([], 0)
    assert dump(seg)[0] == [f"Dumping {seg}", "Log starting offset: 0", b[0], b[1]]  # shallow: batches only
    # a copy elsewhere needs the option, as with Kafka; a key or value decoder wins over the automatic one
    copy = tmp_path / "00000000000000000000.log"
    copy.write_bytes(data)
    assert dump(copy, offsets_decoder=True)[0][3:6] == lines[:3]
    assert dump(copy, print_data_log=True)[0][3].endswith(  # the string decoder, as without the option
        f" key: {group_key.decode()} payload: {entries[0][1].decode()}")
    assert dump(seg, value_decoder=PayloadDecoder.HEX, print_data_log=True)[0][3].endswith(
        f" payload: {entries[0][1].hex()}")
    out = dump(seg, skip_record_metadata=True, deep_iteration=True)[0]
    assert out[3] == '| key: {"type":"3","data":{"groupId":"group"}} payload: {"version":"0","data":{"epoch":10}}'


def test_consumer_offsets_of_an_old_broker_written_by_kafka_python(tmp_path):
    """A 1.x/2.x broker's ``__consumer_offsets``: message format v1 (kafka-python's writer), an
    OffsetCommit record of type 1 (key and value v1 laid out here with struct, as
    OffsetCommitKey.json and OffsetCommitValue.json define them) and a classic group whose member
    protocol bytes are kafka-python's ConsumerProtocol v0 encoders."""
    key = struct.pack(">hh6sh6si", 1, 6, b"orders", 6, b"orders", 2)  # type 1: group, topic, partition
    value = struct.pack(">hqhqq", 1, 42, 0, 1_500_000_000_000, 1_500_086_400_000)  # offset, "", commit, expire
    assert key == encode_coordinator_key(GROUP, 1, {"group": "orders", "topic": "orders", "partition": 2})
    assert value == encode_coordinator_value(GROUP, 1, 1, {"offset": 42, "metadata": "",
                                                          "commitTimestamp": 1_500_000_000_000,
                                                          "expireTimestamp": 1_500_086_400_000})
    subscription = ConsumerProtocolMemberMetadata_v0(0, ["orders", "payments"], b"").encode()
    assignment = ConsumerProtocolMemberAssignment_v0(0, [("orders", [0, 2])], b"\x01").encode()
    group_key = encode_coordinator_key(GROUP, 2, {"group": "orders"})
    group_value = encode_coordinator_value(GROUP, 2, 1, {
        "protocolType": "consumer", "generation": 3, "protocol": "range", "leader": "m-1", "members": [{
            "memberId": "m-1", "clientId": "c", "clientHost": "/10.0.0.1", "rebalanceTimeout": 300000,
            "sessionTimeout": 10000, "subscription": subscription, "assignment": assignment}]})
    builder = LegacyRecordBatchBuilder(1, 0, 1 << 20)
    builder.append(0, 1_500_000_000_000, key, value)
    builder.append(1, 1_500_000_000_001, group_key, group_value)
    d = tmp_path / "__consumer_offsets-12"
    d.mkdir()
    seg = d / "00000000000000000000.log"
    seg.write_bytes(bytes(builder.build()))
    crc0 = legacy_crc(1, 0, 1_500_000_000_000, key, value)
    crc1 = legacy_crc(1, 0, 1_500_000_000_001, group_key, group_value)
    out, err, errors = dump(seg, skip_record_metadata=True, deep_iteration=True)
    assert out[2].startswith(f"offset: 0 position: 0 CreateTime: 1500000000000 size: {12 + 22 + len(key) + len(value)}"
                             f" magic: 1 compresscodec: none crc: {crc0} isvalid: true")
    assert out[3] == (
        '| key: {"type":"1","data":{"group":"orders","topic":"orders","partition":2}} payload: {"version":"1",'
        '"data":{"offset":42,"metadata":"","commitTimestamp":1500000000000,"expireTimestamp":1500086400000}}')
    assert f" crc: {crc1} isvalid: true" in out[4]
    assert out[5] == (
        '| key: {"type":"2","data":{"group":"orders"}} payload: {"version":"1","data":{"protocolType":"consumer",'
        '"generation":3,"protocol":"range","leader":"m-1","members":[{"memberId":"m-1","clientId":"c",'
        '"clientHost":"/10.0.0.1","rebalanceTimeout":300000,"sessionTimeout":10000,"subscription":{"topics":'
        '["orders","payments"],"userData":""},"assignment":{"assignedPartitions":[{"topic":"orders",'
        '"partitions":[0,2]}],"userData":"AQ=="}}]}}')
    assert (len(out), err, errors) == (6, [], 0)


def test_transaction_state_records_as_kafka_json(tmp_path):
    """``--transaction-log-decoder`` (TransactionLogMessageParser in DumpLogSegments.java), picked
    without asking for a segment of ``__transaction_state-N``; TransactionLogValue's tagged fields
    (version 1) show only when not at their default."""
    d = tmp_path / "__transaction_state-3"
    d.mkdir()
    key = encode_coordinator_key(TXN, 0, {"TransactionalId": "txnId"})
    assert key == b"\x00\x00\x00\x05txnId"
    full = {"ClientTransactionVersion": 0, "NextProducerId": 10, "PreviousProducerId": 11, "ProducerEpoch": 2,
            "ProducerId": 12, "TransactionLastUpdateTimestampMs": 123, "TransactionStartTimestampMs": 13,
            "TransactionPartitions": [{"Topic": "topic1", "PartitionIds": [0, 1, 2]},
                                      {"Topic": "topic2", "PartitionIds": [3, 4, 5]}],
            "TransactionStatus": 0, "TransactionTimeoutMs": 14}
    entries = [
        (key, encode_coordinator_value(TXN, 0, 0, {"ProducerId": 123})),
        (key, encode_coordinator_value(TXN, 0, 1, full)),
        (key, None),
        (struct.pack(">h", 32767), b""),
    ]
    # version 0 by hand: producer id, epoch, timeout, status, no partitions, two timestamps
    assert entries[0][1] == struct.pack(">hqhibiqq", 0, 123, 0, 0, 0, 0, 0, 0)
    data = build_record_batch([Record(i, 1000 + i, k, v) for i, (k, v) in enumerate(entries)])
    seg = d / "00000000000000000000.log"
    seg.write_bytes(data)
    tails = [
        ' key: {"type":"0","data":{"transactionalId":"txnId"}} payload: {"version":"0","data":{"producerId":123,'
        '"producerEpoch":0,"transactionTimeoutMs":0,"transactionStatus":0,"transactionPartitions":[],'
        '"transactionLastUpdateTimestampMs":0,"transactionStartTimestampMs":0}}',
        ' key: {"type":"0","data":{"transactionalId":"txnId"}} payload: {"version":"1","data":{"producerId":12,'
        '"previousProducerId":11,"nextProducerId":10,"producerEpoch":2,"transactionTimeoutMs":14,'
        '"transactionStatus":0,"transactionPartitions":[{"topic":"topic1","partitionIds":[0,1,2]},'
        '{"topic":"topic2","partitionIds":[3,4,5]}],"transactionLastUpdateTimestampMs":123,'
        '"transactionStartTimestampMs":13}}',
        ' key: {"type":"0","data":{"transactionalId":"txnId"}} payload: <DELETE>',
        " key: Unknown record type 32767 at offset 3, skipping.",
    ]
    out, err, errors = dump(seg, deep_iteration=True)
    assert out == [f"Dumping {seg}", "Log starting offset: 0", *v2_lines(data), *_record_lines(entries, tails)]
    assert (err, errors) == ([], 0)
    # forced on a copy; --offsets-decoder wins over --transaction-log-decoder, as in Kafka's option order
    copy = tmp_path / "00000000000000000000.log"
    copy.write_bytes(data)
    assert dump(copy, transaction_log_decoder=True)[0][3:] == _record_lines(entries, tails)
    assert dump(copy, transaction_log_decoder=True, offsets_decoder=True)[0][3].endswith(
        f" key: Error at offset 0, skipping. {copy}: the batch at byte 0, key byte 9: OffsetCommitKey.topic: data"
        " ends inside length (expected 2 byte(s) for length, found 0 byte(s))")


def test_corrupt_coordinator_records_name_file_batch_and_byte(tmp_path):
    """A record that does not decode is skipped with one line in the key slot, as Kafka's
    "Error at offset N, skipping." does, but naming the file, the batch's position and the byte of
    the key or value with what was expected (Kafka prints its Java exception's message; a record
    without key stops its whole dump). Nothing goes to stderr, no traceback, exit 0."""
    d = tmp_path / "__consumer_offsets-0"
    d.mkdir()
    key = encode_coordinator_key(GROUP, 1, {"group": "g", "topic": "t", "partition": 0})
    value = encode_coordinator_value(GROUP, 1, 3, {"offset": 5, "leaderEpoch": 1, "metadata": "",
                                                   "commitTimestamp": 7})
    entries = [
        (None, value),  # no key
        (b"\x00", value),  # a key shorter than its record type
        (key[:-2], value),  # the partition cut short
        (key, value[:-3]),  # the commit timestamp (value bytes 16-23: version, offset, epoch, "") cut short
        (key, value[:14] + b"\xff\xff" + value[16:]),  # a null metadata string (not nullable)
        (key, b"\x00"),
    ]
    first = build_record_batch([Record(0, 1000, key, value)])
    data = first + build_record_batch([Record(i + 1, 1001 + i, k, v) for i, (k, v) in enumerate(entries)])
    seg = d / "00000000000000000000.log"
    seg.write_bytes(data)
    at = f"{seg}: the batch at byte {len(first)}"
    out, err, errors = dump(seg, skip_record_metadata=True, deep_iteration=True)
    assert out[3] == ('| key: {"type":"1","data":{"group":"g","topic":"t","partition":0}} payload: {"version":"3",'
                      '"data":{"offset":5,"leaderEpoch":1,"metadata":"","commitTimestamp":7}}')
    assert out[5:] == [
        f"| key: Error at offset 1, skipping. {at}: the record has no key (expected an int16 record type and a group"
        " coordinator record key)",
        f"| key: Error at offset 2, skipping. {at}, key byte 0: data ends inside the record type"
        " (expected 2 bytes for an int16, found 1 byte(s))",
        f"| key: Error at offset 3, skipping. {at}, key byte 8: OffsetCommitKey.partition: data ends inside int32"
        " (expected 4 byte(s) for int32, found 2 byte(s))",
        f"| key: Error at offset 4, skipping. {at}, value byte 16: OffsetCommitValue.commitTimestamp: data ends"
        " inside int64 (expected 8 byte(s) for int64, found 5 byte(s))",
        f"| key: Error at offset 5, skipping. {at}, value byte 14: OffsetCommitValue.metadata: non-nullable field"
        " was serialized as null (expected a length >= 0, found null)",
        f"| key: Error at offset 6, skipping. {at}, value byte 0: data ends inside the value version"
        " (expected 2 bytes for an int16, found 1 byte(s))",
    ]
    assert (err, errors) == ([], 0)
    res = subprocess.run([str(KMIGRATE), "inspect", "--deep-iteration", str(seg)], capture_output=True, text=True,
                         timeout=60, check=False)
    assert (res.returncode, res.stderr) == (0, "")
    assert res.stdout.splitlines()[5].endswith(out[5][1:])


def test_newer_value_versions_read_with_the_highest_known_layout(tmp_path):
    """Kafka's generated readers check no version range (KIP-915: a newer coordinator writes new
    fields as tagged ones): a value of a version above the schema's is read, and printed, in the
    layout of its highest version under its own version number, its unknown tagged fields left
    out; a newer consumer protocol subscription reads as version 3, its extra bytes ignored."""
    offsets, txn = tmp_path / "__consumer_offsets-1", tmp_path / "__transaction_state-1"
    offsets.mkdir()
    txn.mkdir()
    v4 = encode_coordinator_value(GROUP, 1, 4, {"offset": 5, "leaderEpoch": 2, "metadata": "m",
                                                "commitTimestamp": 9})
    newer_offset = b"\x00\x05" + v4[2:-1] + b"\x01\x07\x01\x2a"  # version 5: one unknown tag (7)
    subscription = encode_consumer_protocol(SUBSCRIPTION, 3, {"Topics": ["t"], "RackId": "r"}) + b"\x00\x00"
    group = _group_metadata(b"\x00\x04" + subscription[2:], b"")  # version 4; an empty assignment
    key = encode_coordinator_key(GROUP, 1, {"group": "g", "topic": "t", "partition": 0})
    group_key = encode_coordinator_key(GROUP, 2, {"group": "g"})
    seg = offsets / "00000000000000000000.log"
    seg.write_bytes(build_record_batch([Record(0, 1, key, newer_offset),
                                        Record(1, 2, group_key, encode_coordinator_value(GROUP, 2, 4, group))]))
    out = dump(seg, skip_record_metadata=True, deep_iteration=True)[0]
    assert out[3] == ('| key: {"type":"1","data":{"group":"g","topic":"t","partition":0}} payload: {"version":"5",'
                      '"data":{"offset":5,"leaderEpoch":2,"metadata":"m","commitTimestamp":9}}')
    assert out[4].endswith(',"sessionTimeout":100,"subscription":{"topics":["t"],"userData":null,"ownedPartitions":'
                           '[],"generationId":-1,"rackId":"r"},"assignment":""}]}}')
    txn_key = encode_coordinator_key(TXN, 0, {"TransactionalId": "x"})
    v1 = encode_coordinator_value(TXN, 0, 1, {"ProducerId": 7, "NextProducerId": 8})
    seg = txn / "00000000000000000000.log"
    seg.write_bytes(build_record_batch([Record(0, 1, txn_key, b"\x00\x02" + v1[2:])]))
    assert dump(seg, skip_record_metadata=True, deep_iteration=True)[0][3] == (
        '| key: {"type":"0","data":{"transactionalId":"x"}} payload: {"version":"2","data":{"producerId":7,'
        '"nextProducerId":8,"producerEpoch":0,"transactionTimeoutMs":0,"transactionStatus":0,'
        '"transactionPartitions":[],"transactionLastUpdateTimestampMs":0,"transactionStartTimestampMs":0}}')


def test_coordinator_decoder_options_and_json(tmp_path):
    d = tmp_path / "__transaction_state-0"
    d.mkdir()
    seg = d / "00000000000000000000.log"
    key = encode_coordinator_key(TXN, 0, {"TransactionalId": "t"})
    seg.write_bytes(build_record_batch([Record(0, 5, key, None)]))
    res = runner.invoke(app, ["inspect", "--json", "--deep-iteration", str(seg)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert rows[-1]["key"] == {"type": "0", "data": {"transactionalId": "t"}} and rows[-1]["payload"] == "<DELETE>"
    copy = tmp_path / "00000000000000000000.log"
    copy.write_bytes(seg.read_bytes())
    res = runner.invoke(app, ["inspect", "--transaction-log-decoder", str(copy)])  # implies --print-data-log
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[-1].endswith(' key: {"type":"0","data":{"transactionalId":"t"}} payload: <DELETE>')
    for args in (["--offsets-decoder", "--transaction-log-decoder"],
                 ["--cluster-metadata-decoder", "--offsets-decoder"], ["--offsets-decoder", "--value-decoder", "hex"]):
        res = runner.invoke(app, ["inspect", *args, str(copy)])
        assert res.exit_code == 2 and res.stdout == "", args
    assert "pass one of them" in runner.invoke(app, ["inspect", "--offsets-decoder", "--transaction-log-decoder",
                                                     str(copy)]).stderr


# ------------------------------------------------------------------ indexes, producer snapshots


def _indexed_segment(d: Path) -> tuple[Path, list[int]]:
    batches = [build_record_batch([Record(10, 1000, None, b"a"), Record(11, 1001, None, b"b"),
                                   Record(12, 1002, None, b"c")]),
               build_record_batch([Record(13, 2000, None, b"d"), Record(14, 2001, None, b"e")]),
               build_record_batch([Record(15, 3000, None, b"f")])]
    seg = d / "00000000000000000010.log"
    seg.write_bytes(b"".join(batches))
    positions = [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    return seg, positions


def test_offset_index(tmp_path):
    seg, pos = _indexed_segment(tmp_path)
    index = tmp_path / "00000000000000000010.index"
    OffsetIndex(10, [(12, pos[0]), (14, pos[1])]).write(index)
    index.write_bytes(index.read_bytes() + bytes(24))  # a preallocated tail: dump stops at the zero entry
    assert dump(index) == ([f"Dumping {index}", "offset: 12 position: 0", f"offset: 14 position: {pos[1]}"], [], 0)
    assert dump(index, verify_index_only=True) == ([f"Dumping {index}"], [], 0)
    assert dump(index, index_sanity_check=True)[0] == [f"Dumping {index}", f"{index} passed sanity check."]
    # entries whose offset is not the last offset of the batch at their position (Kafka lists
    # them highest index offset first)
    index.write_bytes(struct.pack(">ii", 1, pos[0]) + struct.pack(">ii", 4, pos[1]) + struct.pack(">ii", 6, pos[1]))
    out, err, errors = dump(index)
    assert out == [f"Dumping {index}", "offset: 11 position: 0", f"offset: 14 position: {pos[1]}",
                   f"offset: 16 position: {pos[1]}"]
    assert err == [f"Mismatches in :{index}", "  Index offset: 16, log offset: 14",
                   "  Index offset: 11, log offset: 12"]
    assert errors == 0
    index.write_bytes(b"")
    assert dump(index)[0] == [f"Dumping {index}", f"{index} is empty."]


def test_time_index(tmp_path):
    seg, pos = _indexed_segment(tmp_path)
    OffsetIndex(10, [(12, pos[0]), (14, pos[1])]).write(tmp_path / "00000000000000000010.index")
    tindex = tmp_path / "00000000000000000010.timeindex"
    TimeIndex(10, [(1002, 12), (2001, 14)]).write(tindex)
    assert dump(tindex) == ([f"Dumping {tindex}", "timestamp: 1002 offset: 12", "timestamp: 2001 offset: 14"], [], 0)
    # wrong timestamp, out of order, an offset that is no batch's last, one past the log
    tindex.write_bytes(b"".join(struct.pack(">qi", t, o - 10) for t, o in
                                ((1500, 12), (900, 14), (3000, 13), (5000, 99))))
    out, err, errors = dump(tindex)
    assert out[1:] == ["timestamp: 1500 offset: 12", "timestamp: 900 offset: 14", "timestamp: 3000 offset: 13",
                       "timestamp: 5000 offset: 99"]
    assert err == [
        f"Found timestamp mismatch in :{tindex}",
        "  Index timestamp: 1500, log timestamp: 1002",
        "  Index timestamp: 900, log timestamp: 2001",
        f"Found out of order timestamp in :{tindex}",
        "  Index timestamp: 900, Previously indexed timestamp: 1500",
        f"The following indexed offsets are not found in :{tindex}",
        "Indexed offset: 13, found log offset: 14",
        "Indexed offset: 99, found log offset: -1",
    ]
    assert errors == 0


def test_a_truncated_producer_snapshot_names_the_byte(tmp_path):
    """(The lines of .txnindex and .snapshot files are judged by the real kafka-dump-log:
    tests/realkafka/test_dump_log_parity.py.)"""
    snap = tmp_path / "00000000000000000016.snapshot"
    ProducerSnapshot([ProducerSnapshotEntry(4711, 3, last_sequence=19, last_offset=14, offset_delta=2,
                                            timestamp=2001)]).write(snap)
    snap.write_bytes(snap.read_bytes()[:-1])
    out, err, errors = dump(snap)
    assert out == [f"Dumping {snap}"] and errors == 1
    assert len(err) == 1 and err[0].startswith(f"error: {snap}: byte ") and "expected" in err[0]


# ------------------------------------------------------------------ Kafka's DumpLogSegmentsTest shapes


def _kafka_test_segment(d: Path) -> tuple[Path, list[tuple[int, bool, bool]]]:
    """DumpLogSegmentsTest.addSimpleRecords, written with kafka-python: 10 records with key and
    value, 20 with a key, 20 with a value, 10 with neither; (size, has keys, has values)."""
    spec = [(range(0, 10), True, True), (range(10, 30), True, False), (range(30, 50), False, True),
            (range(50, 60), False, False)]
    parts, info = [], []
    for offsets, keys, vals in spec:
        b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
        for i in offsets:
            b.append(i - offsets[0], 1_700_000_000_000 + i, f"message key {i}".encode() if keys else None,
                     f"message value {i}".encode() if vals else None, [])
        data = bytearray(b.build())
        struct.pack_into(">q", data, 0, offsets[0])  # the base offset is not covered by the CRC
        parts.append(bytes(data))
        info.append((len(offsets), keys, vals))
    seg = d / "00000000000000000000.log"
    seg.write_bytes(b"".join(parts))
    return seg, info


def _fields(line: str) -> dict[str, str]:
    """DumpLogSegmentsTest.parseMetadataFields: ``name: value`` token pairs."""
    tokens = line.split()
    assert all(t.endswith(":") for t in tokens[::2]), line
    return dict(zip((t[:-1] for t in tokens[::2]), tokens[1::2], strict=True))


@pytest.mark.parametrize("options,with_data", [({"print_data_log": True}, True),
                                               ({"print_data_log": True, "deep_iteration": True}, True),
                                               ({"value_decoder": PayloadDecoder.STRING, "print_data_log": True}, True),
                                               ({"deep_iteration": True}, False)])
def test_kafka_dump_log_segments_test_record_lines(tmp_path, options, with_data):
    seg, info = _kafka_test_segment(tmp_path)
    lines = dump(seg, **options)[0]
    total = sum(n for n, _, _ in info)
    lines = lines[len(lines) - total - len(info):]
    offset, i = 0, 0
    for n, keys, vals in info:
        assert lines[i].startswith(f"baseOffset: {offset} lastOffset: "), lines[i]
        i += 1
        for _ in range(n):
            assert lines[i].startswith(f"| offset: {offset}"), lines[i]
            if with_data:
                suffix = "headerKeys: []" + (f" key: message key {offset}" if keys else "") + (
                    f" payload: message value {offset}" if vals else "")
                assert lines[i].endswith(suffix), lines[i]
            else:
                rec = _fields(lines[i][1:])
                assert list(rec) == ["offset", "CreateTime", "keySize", "valueSize", "sequence", "headerKeys"]
                assert rec["CreateTime"] == str(1_700_000_000_000 + offset)
                assert rec["keySize"] == (str(len(f"message key {offset}")) if keys else "-1")
            offset += 1
            i += 1


def test_kafka_dump_log_segments_test_batch_fields_and_max_bytes(tmp_path):
    seg, info = _kafka_test_segment(tmp_path)
    out = dump(seg)[0]
    assert not any(" isvalid" in line and line.startswith("| ") for line in out)
    batches = [_fields(line) for line in out if line.startswith("baseOffset")]
    assert [list(b) for b in batches] == [[
        "baseOffset", "lastOffset", "count", "baseSequence", "lastSequence", "producerId", "producerEpoch",
        "partitionLeaderEpoch", "isTransactional", "isControl", "deleteHorizonMs", "position", "CreateTime", "size",
        "magic", "compresscodec", "crc", "isvalid"]] * 4
    assert [b["count"] for b in batches] == [str(n) for n, _, _ in info]
    assert {b["isvalid"] for b in batches} == {"true"} and {b["compresscodec"] for b in batches} == {"none"}
    # testPrintDataLogPartialBatches: --max-bytes of the first two batches' sizes gives two batches
    partial = sum(int(b["size"]) for b in batches[:2])
    assert sum(line.startswith("baseOffset") for line in dump(seg, max_bytes=partial)[0]) == 2


# ------------------------------------------------------------------ errors, JSON, the command


def test_corrupt_segment_names_file_position_and_expectation_without_traceback(tmp_path):
    data = bytearray(_transactional_segment())
    second = 12 + struct.unpack_from(">i", data, 8)[0]
    struct.pack_into(">i", data, second + 8, 5)  # a size below the 14-byte minimum
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(bytes(data))
    other = tmp_path / "00000000000000000000.txnindex"
    TransactionIndex(0, [AbortedTxn(1, 2, 3, 2)]).write(other)
    res = subprocess.run([str(KMIGRATE), "inspect", str(seg), str(other), str(tmp_path / "notes.txt")],
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 2 and "notes.txt: no such file" in res.stderr  # refused before any output
    assert res.stdout == ""
    (tmp_path / "notes.txt").write_text("x")
    res = subprocess.run([str(KMIGRATE), "inspect", str(seg), str(other), str(tmp_path / "notes.txt")],
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 1
    assert "Traceback" not in res.stderr + res.stdout
    assert res.stderr.splitlines() == [
        f"error: {seg}: byte {second + 8}: record size is smaller than the minimum record overhead"
        " (expected >= 14, found 5)",
        f"Ignoring unknown file {tmp_path / 'notes.txt'}",
    ]
    # the batch before the damage is printed, the next file still dumped
    assert res.stdout.splitlines() == [f"Dumping {seg}", "Log starting offset: 0", v2_lines(bytes(data[:second]))[0],
                                       f"Dumping {other}",
                                       "version: 0 producerId: 1 firstOffset: 2 lastOffset: 3 lastStableOffset: 2",
                                       f"Dumping {tmp_path / 'notes.txt'}"]


def test_corrupt_compressed_records_in_deep_iteration(tmp_path):
    data = bytearray(_transactional_segment())
    at = 0
    for _ in range(2):
        at += 12 + struct.unpack_from(">i", data, at + 8)[0]
    data[at + 61 + 12] ^= 0xFF  # inside the gzip stream of the third batch
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(bytes(data))
    out, err, errors = dump(seg, deep_iteration=True)
    assert errors == 1 and len(err) == 1 and err[0].startswith(f"error: {seg}: byte ")
    assert out[-1].startswith("baseOffset: 3 lastOffset: 4 ") and " isvalid: false" in out[-1]


def test_json_lines_and_usage_errors(tmp_path):
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(_transactional_segment())
    res = runner.invoke(app, ["inspect", "--json", "--files", f"{seg},{seg}", "--deep-iteration"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert [r["entry"] for r in rows[:5]] == ["file", "logStartingOffset", "batch", "record", "record"]
    assert rows[2]["deleteHorizonMs"] is None and rows[2]["isTransactional"] is True
    assert rows[3]["headerKeys"] == ["trace", "span"] and rows[3]["timestampType"] == "CreateTime"
    assert [r["endTxnMarker"] for r in rows if "endTxnMarker" in r] == ["COMMIT", "ABORT"] * 2
    assert runner.invoke(app, ["inspect"]).exit_code == 2
    assert runner.invoke(app, ["inspect", str(tmp_path)]).exit_code == 2
    assert runner.invoke(app, ["inspect", "--value-decoder", "avro", str(seg)]).exit_code == 2


def test_a_wrapper_whose_crc_does_not_match_makes_inspect_exit_1(tmp_path):
    """The help says exit 1 when a file holds bad bytes; a shallow dump printed the corrupt
    wrapper as ``isvalid: false`` and exited 0."""
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=1, batch_size=1 << 20)  # gzip, by kafka-python
    for i in range(20):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"value %d " % i * 8)
    seg = tmp_path / "00000000000000000000.log"
    data = bytearray(builder.build())
    data[len(data) // 2] ^= 0xFF  # inside the wrapper's compressed value
    seg.write_bytes(bytes(data))
    res = runner.invoke(app, ["inspect", str(seg)])
    assert "isvalid: false" in res.stdout, res.output
    assert res.exit_code == 1, res.output
