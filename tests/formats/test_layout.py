"""The offset chains of layout.py: Kafka's numbers (Records.java, LegacyRecord.java,
DefaultRecordBatch.java; docs/formats.md §0.3, §1.2, §2.1), each offset the previous one plus the
previous length, and the compiled core built from them."""

from __future__ import annotations

import pytest

from migration.formats import core, layout, legacy, model, record_batch

# (offset name, length name) in byte order, then the name of the size the chain ends at
CHAINS: dict[str, tuple[list[tuple[str, str]], str]] = {
    "log entry": (
        [("OFFSET_OFFSET", "OFFSET_LENGTH"), ("SIZE_OFFSET", "SIZE_LENGTH"),
         ("LOG_OVERHEAD", "CRC_OR_LEADER_EPOCH_LENGTH"), ("MAGIC_OFFSET", "MAGIC_LENGTH")],
        "HEADER_SIZE_UP_TO_MAGIC",
    ),
    "v0 message": (
        [("LEGACY_CRC_OFFSET", "LEGACY_CRC_LENGTH"), ("LEGACY_MAGIC_OFFSET", "LEGACY_MAGIC_LENGTH"),
         ("LEGACY_ATTRIBUTES_OFFSET", "LEGACY_ATTRIBUTES_LENGTH"), ("KEY_SIZE_OFFSET_V0", "KEY_SIZE_LENGTH")],
        "KEY_OFFSET_V0",
    ),
    "v1 message": (
        [("LEGACY_CRC_OFFSET", "LEGACY_CRC_LENGTH"), ("LEGACY_MAGIC_OFFSET", "LEGACY_MAGIC_LENGTH"),
         ("LEGACY_ATTRIBUTES_OFFSET", "LEGACY_ATTRIBUTES_LENGTH"),
         ("LEGACY_TIMESTAMP_OFFSET", "LEGACY_TIMESTAMP_LENGTH"), ("KEY_SIZE_OFFSET_V1", "KEY_SIZE_LENGTH")],
        "KEY_OFFSET_V1",
    ),
    "v2 batch": (
        [("BASE_OFFSET_OFFSET", "BASE_OFFSET_LENGTH"), ("LENGTH_OFFSET", "LENGTH_LENGTH"),
         ("PARTITION_LEADER_EPOCH_OFFSET", "PARTITION_LEADER_EPOCH_LENGTH"), ("MAGIC_OFFSET", "MAGIC_LENGTH"),
         ("CRC_OFFSET", "CRC_LENGTH"), ("ATTRIBUTES_OFFSET", "ATTRIBUTES_LENGTH"),
         ("LAST_OFFSET_DELTA_OFFSET", "LAST_OFFSET_DELTA_LENGTH"), ("BASE_TIMESTAMP_OFFSET", "BASE_TIMESTAMP_LENGTH"),
         ("MAX_TIMESTAMP_OFFSET", "MAX_TIMESTAMP_LENGTH"), ("PRODUCER_ID_OFFSET", "PRODUCER_ID_LENGTH"),
         ("PRODUCER_EPOCH_OFFSET", "PRODUCER_EPOCH_LENGTH"), ("BASE_SEQUENCE_OFFSET", "BASE_SEQUENCE_LENGTH"),
         ("RECORDS_COUNT_OFFSET", "RECORDS_COUNT_LENGTH")],
        "RECORD_BATCH_OVERHEAD",
    ),
}

# Kafka's values (Records.java, LegacyRecord.java, DefaultRecordBatch.java)
KAFKA = {
    "OFFSET_OFFSET": 0, "SIZE_OFFSET": 8, "LOG_OVERHEAD": 12, "MAGIC_OFFSET": 16, "HEADER_SIZE_UP_TO_MAGIC": 17,
    "LEGACY_CRC_OFFSET": 0, "LEGACY_MAGIC_OFFSET": 4, "LEGACY_ATTRIBUTES_OFFSET": 5, "LEGACY_TIMESTAMP_OFFSET": 6,
    "KEY_SIZE_OFFSET_V0": 6, "KEY_SIZE_OFFSET_V1": 14, "KEY_OFFSET_V0": 10, "KEY_OFFSET_V1": 18,
    "HEADER_SIZE_V0": 6, "HEADER_SIZE_V1": 14, "RECORD_OVERHEAD_V0": 14, "RECORD_OVERHEAD_V1": 22,
    "MIN_MESSAGE_SIZE": 14, "V1_MINUS_V0_SIZE": 8,
    "BASE_OFFSET_OFFSET": 0, "LENGTH_OFFSET": 8, "PARTITION_LEADER_EPOCH_OFFSET": 12, "CRC_OFFSET": 17,
    "ATTRIBUTES_OFFSET": 21, "LAST_OFFSET_DELTA_OFFSET": 23, "BASE_TIMESTAMP_OFFSET": 27, "MAX_TIMESTAMP_OFFSET": 35,
    "PRODUCER_ID_OFFSET": 43, "PRODUCER_EPOCH_OFFSET": 51, "BASE_SEQUENCE_OFFSET": 53, "RECORDS_COUNT_OFFSET": 57,
    "RECORDS_OFFSET": 61, "RECORD_BATCH_OVERHEAD": 61,
}


def _int_names() -> dict[str, int]:
    return {k: v for k, v in vars(layout).items() if k.isupper() and isinstance(v, int)}


@pytest.mark.parametrize("name", sorted(KAFKA))
def test_offsets_are_kafkas(name: str) -> None:
    assert getattr(layout, name) == KAFKA[name]


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_each_offset_is_the_previous_offset_plus_its_length(chain: str) -> None:
    fields, end = CHAINS[chain]
    assert getattr(layout, fields[0][0]) == 0
    for (prev_off, prev_len), (off, _) in zip(fields, fields[1:], strict=False):
        assert getattr(layout, off) == getattr(layout, prev_off) + getattr(layout, prev_len), (chain, off)
    last_off, last_len = fields[-1]
    assert getattr(layout, end) == getattr(layout, last_off) + getattr(layout, last_len)


def test_the_three_formats_share_the_prefix() -> None:
    # Byte 16 is the magic whatever the format (the reader dispatches on it, docs/formats.md §0.3).
    assert layout.LOG_OVERHEAD + layout.LEGACY_MAGIC_OFFSET == layout.MAGIC_OFFSET
    assert layout.PARTITION_LEADER_EPOCH_OFFSET + layout.PARTITION_LEADER_EPOCH_LENGTH == layout.MAGIC_OFFSET
    assert layout.LEGACY_CRC_LENGTH == layout.PARTITION_LEADER_EPOCH_LENGTH == layout.CRC_OR_LEADER_EPOCH_LENGTH
    assert layout.LENGTH_OFFSET == layout.SIZE_OFFSET


def test_the_modules_reexport_the_layout() -> None:
    assert (model.LOG_OVERHEAD, model.HEADER_SIZE_UP_TO_MAGIC, model.MIN_MESSAGE_SIZE) == (12, 17, 14)
    assert (legacy.V0_RECORD_OVERHEAD, legacy.V1_RECORD_OVERHEAD, legacy.V1_MINUS_V0_SIZE) == (14, 22, 8)
    assert (record_batch.CRC_OFFSET, record_batch.ATTRIBUTES_OFFSET, record_batch.RECORDS_COUNT_OFFSET,
            record_batch.RECORD_BATCH_OVERHEAD) == (17, 21, 57, 61)


def test_the_compiled_core_spells_the_same_chains() -> None:
    if core.compiled is None:
        pytest.skip("the compiled core is not built")
    # setup.py writes _clayout.pxd from layout.py at build time: every constant reaches C, with
    # layout.py's value (a stale build or a dropped name fails here)
    spelled = core.compiled.LAYOUT
    names = _int_names()
    assert spelled == names
    assert names["SAFE_DELTA"] > 2**31  # the int64_t macro path of the generator, not the C enum
    assert {"SIZE_OFFSET", "MAGIC_OFFSET", "HEADER_SIZE_UP_TO_MAGIC", "MIN_MESSAGE_SIZE", "LEGACY_CRC_OFFSET",
            "LEGACY_MAGIC_OFFSET", "LEGACY_ATTRIBUTES_OFFSET", "LEGACY_TIMESTAMP_OFFSET", "KEY_SIZE_OFFSET_V0",
            "KEY_SIZE_OFFSET_V1", "RECORD_OVERHEAD_V0", "RECORD_OVERHEAD_V1", "PARTITION_LEADER_EPOCH_OFFSET",
            "CRC_OFFSET", "ATTRIBUTES_OFFSET", "LAST_OFFSET_DELTA_OFFSET", "BASE_TIMESTAMP_OFFSET",
            "MAX_TIMESTAMP_OFFSET", "PRODUCER_ID_OFFSET", "PRODUCER_EPOCH_OFFSET", "BASE_SEQUENCE_OFFSET",
            "RECORDS_COUNT_OFFSET", "RECORD_BATCH_OVERHEAD"} <= set(spelled)
