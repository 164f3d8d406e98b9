# cython: language_level=3
"""The layouts of docs/formats.md as C constants, the twin of ``layout.py`` (every offset is
the previous one plus the previous field's length, with layout.py's names;
tests/formats/test_layout.py pins them to it through ``_clayout.LAYOUT``):

  v0/v1 log entry (§1.2)  offset int64 | size int32 | crc uint32 | magic int8 | attributes int8
                          | [v1: timestamp int64] | key_length int32 | key | value_length int32 | value
                          CRC-32 over [magic, end)
  v2 batch (§2.1)         base offset int64 @0 | length int32 @8 | leader epoch int32 @12 | magic @16
                          | crc uint32 @17 (CRC-32C over [21, end)) | attributes int16 @21
                          | last offset delta int32 @23 | base timestamp int64 @27
                          | max timestamp int64 @35 | producer id int64 @43 | producer epoch int16 @51
                          | base sequence int32 @53 | records count int32 @57 | records @61
  v2 record (§2.4)        length varint | attributes int8 | timestamp delta varlong
                          | offset delta varint | key length varint | key | value length varint
                          | value | header count varint | (key length varint, key, value length
                          varint, value)*
"""

from libc.stdint cimport int64_t

cdef enum:
    # Every log entry (§0.3, Records.java): X_OFFSET = PREV_OFFSET + PREV_LENGTH
    OFFSET_OFFSET = 0
    OFFSET_LENGTH = 8
    SIZE_OFFSET = OFFSET_OFFSET + OFFSET_LENGTH
    SIZE_LENGTH = 4
    LOG_OVERHEAD = SIZE_OFFSET + SIZE_LENGTH
    CRC_OR_LEADER_EPOCH_LENGTH = 4   # v0/v1 message CRC, v2 PartitionLeaderEpoch
    MAGIC_OFFSET = LOG_OVERHEAD + CRC_OR_LEADER_EPOCH_LENGTH
    MAGIC_LENGTH = 1
    HEADER_SIZE_UP_TO_MAGIC = MAGIC_OFFSET + MAGIC_LENGTH   # bytes every entry starts with
    # v0/v1 message (§1.2, LegacyRecord.java): positions in the message, which starts after LOG_OVERHEAD
    LEGACY_CRC_OFFSET = 0
    LEGACY_CRC_LENGTH = 4
    LEGACY_MAGIC_OFFSET = LEGACY_CRC_OFFSET + LEGACY_CRC_LENGTH
    LEGACY_MAGIC_LENGTH = 1
    LEGACY_ATTRIBUTES_OFFSET = LEGACY_MAGIC_OFFSET + LEGACY_MAGIC_LENGTH
    LEGACY_ATTRIBUTES_LENGTH = 1
    LEGACY_TIMESTAMP_OFFSET = LEGACY_ATTRIBUTES_OFFSET + LEGACY_ATTRIBUTES_LENGTH   # v1 only
    LEGACY_TIMESTAMP_LENGTH = 8
    KEY_SIZE_OFFSET_V0 = LEGACY_ATTRIBUTES_OFFSET + LEGACY_ATTRIBUTES_LENGTH
    KEY_SIZE_OFFSET_V1 = LEGACY_TIMESTAMP_OFFSET + LEGACY_TIMESTAMP_LENGTH
    KEY_SIZE_LENGTH = 4
    VALUE_SIZE_LENGTH = 4
    RECORD_OVERHEAD_V0 = KEY_SIZE_OFFSET_V0 + KEY_SIZE_LENGTH + VALUE_SIZE_LENGTH
    RECORD_OVERHEAD_V1 = KEY_SIZE_OFFSET_V1 + KEY_SIZE_LENGTH + VALUE_SIZE_LENGTH
    MIN_MESSAGE_SIZE = RECORD_OVERHEAD_V0
    V1_MINUS_V0_SIZE = KEY_SIZE_OFFSET_V1 - KEY_SIZE_OFFSET_V0   # the v1 timestamp field
    V1_HEAD = KEY_SIZE_OFFSET_V1 - LEGACY_MAGIC_OFFSET          # magic, attributes, timestamp: the CRC's first bytes
    # ... and as positions in the log entry
    LEGACY_CRC_AT = LOG_OVERHEAD + LEGACY_CRC_OFFSET
    LEGACY_MAGIC_AT = LOG_OVERHEAD + LEGACY_MAGIC_OFFSET   # the CRC covers [magic, end of message)
    LEGACY_ATTRIBUTES_AT = LOG_OVERHEAD + LEGACY_ATTRIBUTES_OFFSET
    V1_TIMESTAMP_AT = LOG_OVERHEAD + LEGACY_TIMESTAMP_OFFSET
    V0_KEY_LENGTH_AT = LOG_OVERHEAD + KEY_SIZE_OFFSET_V0
    V1_KEY_LENGTH_AT = LOG_OVERHEAD + KEY_SIZE_OFFSET_V1
    LEGACY_CODEC_MASK = 0x07
    LEGACY_TIMESTAMP_TYPE_MASK = 0x08   # attributes bit 3, v1 only (§1.9)
    # v2 batch (§2.1, DefaultRecordBatch.java)
    BASE_OFFSET_OFFSET = 0
    BASE_OFFSET_LENGTH = 8
    LENGTH_OFFSET = BASE_OFFSET_OFFSET + BASE_OFFSET_LENGTH
    LENGTH_LENGTH = 4
    PARTITION_LEADER_EPOCH_OFFSET = LENGTH_OFFSET + LENGTH_LENGTH
    PARTITION_LEADER_EPOCH_LENGTH = 4
    # MAGIC_OFFSET, MAGIC_LENGTH: as above (PARTITION_LEADER_EPOCH_OFFSET + PARTITION_LEADER_EPOCH_LENGTH)
    CRC_OFFSET = MAGIC_OFFSET + MAGIC_LENGTH
    CRC_LENGTH = 4
    ATTRIBUTES_OFFSET = CRC_OFFSET + CRC_LENGTH
    ATTRIBUTES_LENGTH = 2
    LAST_OFFSET_DELTA_OFFSET = ATTRIBUTES_OFFSET + ATTRIBUTES_LENGTH
    LAST_OFFSET_DELTA_LENGTH = 4
    BASE_TIMESTAMP_OFFSET = LAST_OFFSET_DELTA_OFFSET + LAST_OFFSET_DELTA_LENGTH
    BASE_TIMESTAMP_LENGTH = 8
    MAX_TIMESTAMP_OFFSET = BASE_TIMESTAMP_OFFSET + BASE_TIMESTAMP_LENGTH
    MAX_TIMESTAMP_LENGTH = 8
    PRODUCER_ID_OFFSET = MAX_TIMESTAMP_OFFSET + MAX_TIMESTAMP_LENGTH
    PRODUCER_ID_LENGTH = 8
    PRODUCER_EPOCH_OFFSET = PRODUCER_ID_OFFSET + PRODUCER_ID_LENGTH
    PRODUCER_EPOCH_LENGTH = 2
    BASE_SEQUENCE_OFFSET = PRODUCER_EPOCH_OFFSET + PRODUCER_EPOCH_LENGTH
    BASE_SEQUENCE_LENGTH = 4
    RECORDS_COUNT_OFFSET = BASE_SEQUENCE_OFFSET + BASE_SEQUENCE_LENGTH
    RECORDS_COUNT_LENGTH = 4
    RECORD_BATCH_OVERHEAD = RECORDS_COUNT_OFFSET + RECORDS_COUNT_LENGTH
    V2_CODEC_MASK = 0x07
    V2_TIMESTAMP_TYPE_MASK = 0x08
    V2_MAX_CODEC = 4
    LEGACY_MAX_CODEC = 3         # zstd (4) is refused below magic 2
    # The digest's canonical record head (digest.py): offset int64, header count int32
    DIGEST_OFFSET_LENGTH = 8
    DIGEST_HEADER_COUNT_LENGTH = 4
    RECORD_HEAD = DIGEST_OFFSET_LENGTH + DIGEST_HEADER_COUNT_LENGTH

cdef extern from *:
    """
    #define KMIGRATE_SAFE_DELTA ((int64_t)17179869184LL)
    """
    # 2**34, as _pycore.SAFE_DELTA: a timestamp delta or base this close to the int64 limits
    # may leave int64; only the careful decoder handles them
    int64_t SAFE_DELTA "KMIGRATE_SAFE_DELTA"
