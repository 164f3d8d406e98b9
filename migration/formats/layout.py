"""Byte layouts of log entries as offset chains: every field's offset is the previous field's
offset plus the previous field's length, the lengths being named, as Kafka defines them in
``Records.java``, ``LegacyRecord.java`` and ``DefaultRecordBatch.java``.

Every entry of a ``.log`` or ``.checkpoint`` file (docs/formats.md §0.3, ``Records.java``)::

    0   OFFSET_OFFSET                  offset / BaseOffset int64        OFFSET_LENGTH 8
    8   SIZE_OFFSET                    size / Length int32              SIZE_LENGTH 4
    12  (LOG_OVERHEAD)                 v0/v1 crc, v2 leader epoch       CRC_OR_LEADER_EPOCH_LENGTH 4
    16  MAGIC_OFFSET                   magic int8                       MAGIC_LENGTH 1
    17  HEADER_SIZE_UP_TO_MAGIC

A v0/v1 message (docs/formats.md §1.2, ``LegacyRecord.java``), positions in the message, which
starts after the entry's LOG_OVERHEAD (add it for a position in the entry)::

    0   LEGACY_CRC_OFFSET              crc uint32                       LEGACY_CRC_LENGTH 4
    4   LEGACY_MAGIC_OFFSET            magic int8                       LEGACY_MAGIC_LENGTH 1
    5   LEGACY_ATTRIBUTES_OFFSET       attributes int8                  LEGACY_ATTRIBUTES_LENGTH 1
    6   LEGACY_TIMESTAMP_OFFSET        v1 only: timestamp int64         LEGACY_TIMESTAMP_LENGTH 8
    6   KEY_SIZE_OFFSET_V0 / 14 KEY_SIZE_OFFSET_V1    key length int32  KEY_SIZE_LENGTH 4
    10  KEY_OFFSET_V0 / 18 KEY_OFFSET_V1              key, then value length int32 (VALUE_SIZE_LENGTH 4), value
    HEADER_SIZE_V0 6, HEADER_SIZE_V1 14 (V1_MINUS_V0_SIZE 8); RECORD_OVERHEAD_V0 14, RECORD_OVERHEAD_V1 22
    (null key and value)

A v2 batch header (docs/formats.md §2.1, ``DefaultRecordBatch.java``)::

    0   BASE_OFFSET_OFFSET             BaseOffset int64                 BASE_OFFSET_LENGTH 8
    8   LENGTH_OFFSET                  Length int32 (size - 12)         LENGTH_LENGTH 4
    12  PARTITION_LEADER_EPOCH_OFFSET  PartitionLeaderEpoch int32       PARTITION_LEADER_EPOCH_LENGTH 4
    16  MAGIC_OFFSET                   Magic int8 = 2                   MAGIC_LENGTH 1
    17  CRC_OFFSET                     CRC uint32                       CRC_LENGTH 4
    21  ATTRIBUTES_OFFSET              Attributes int16                 ATTRIBUTES_LENGTH 2
    23  LAST_OFFSET_DELTA_OFFSET       LastOffsetDelta int32            LAST_OFFSET_DELTA_LENGTH 4
    27  BASE_TIMESTAMP_OFFSET          BaseTimestamp int64              BASE_TIMESTAMP_LENGTH 8
    35  MAX_TIMESTAMP_OFFSET           MaxTimestamp int64               MAX_TIMESTAMP_LENGTH 8
    43  PRODUCER_ID_OFFSET             ProducerId int64                 PRODUCER_ID_LENGTH 8
    51  PRODUCER_EPOCH_OFFSET          ProducerEpoch int16              PRODUCER_EPOCH_LENGTH 2
    53  BASE_SEQUENCE_OFFSET           BaseSequence int32               BASE_SEQUENCE_LENGTH 4
    57  RECORDS_COUNT_OFFSET           RecordsCount int32               RECORDS_COUNT_LENGTH 4
    61  RECORDS_OFFSET = RECORD_BATCH_OVERHEAD

The three layouts sit in one module because the careful parsers (``legacy.py``,
``record_batch.py``), the Python record core (``_pycore.py``, which those parsers import) and
``model.py`` all need them, and the format layer's imports have no cycles; ``legacy.py`` and
``record_batch.py`` re-export the names that are theirs. The compiled core takes every upper-case
int of this module as a C constant from ``_clayout.pxd``, which setup.py writes from this file at
build time (so this module imports nothing); tests/formats/test_layout.py pins the chains to
Kafka's numbers and the compiled constants to this module.
Kafka names v2's base timestamp FIRST_TIMESTAMP in older releases and the attributes' length
ATTRIBUTE_LENGTH; the v0/v1 names take a ``LEGACY_`` prefix where the v2 chain has the same one.
"""

from __future__ import annotations

# ---------------------------------------------------------------- every log entry (Records.java)

OFFSET_OFFSET = 0
OFFSET_LENGTH = 8
SIZE_OFFSET = OFFSET_OFFSET + OFFSET_LENGTH
SIZE_LENGTH = 4
LOG_OVERHEAD = SIZE_OFFSET + SIZE_LENGTH
# Between size and magic: the message CRC (v0/v1) or the PartitionLeaderEpoch (v2), 4 bytes in
# every format (Records.java adds the 4 as a number).
CRC_OR_LEADER_EPOCH_LENGTH = 4
MAGIC_OFFSET = LOG_OVERHEAD + CRC_OR_LEADER_EPOCH_LENGTH
MAGIC_LENGTH = 1
HEADER_SIZE_UP_TO_MAGIC = MAGIC_OFFSET + MAGIC_LENGTH

# ---------------------------------------------------------------- v0/v1 message (LegacyRecord.java)

LEGACY_CRC_OFFSET = 0
LEGACY_CRC_LENGTH = 4
LEGACY_MAGIC_OFFSET = LEGACY_CRC_OFFSET + LEGACY_CRC_LENGTH
LEGACY_MAGIC_LENGTH = 1
LEGACY_ATTRIBUTES_OFFSET = LEGACY_MAGIC_OFFSET + LEGACY_MAGIC_LENGTH
LEGACY_ATTRIBUTES_LENGTH = 1
LEGACY_TIMESTAMP_OFFSET = LEGACY_ATTRIBUTES_OFFSET + LEGACY_ATTRIBUTES_LENGTH  # v1 only
LEGACY_TIMESTAMP_LENGTH = 8
KEY_SIZE_OFFSET_V0 = LEGACY_ATTRIBUTES_OFFSET + LEGACY_ATTRIBUTES_LENGTH
KEY_SIZE_OFFSET_V1 = LEGACY_TIMESTAMP_OFFSET + LEGACY_TIMESTAMP_LENGTH
KEY_SIZE_LENGTH = 4
KEY_OFFSET_V0 = KEY_SIZE_OFFSET_V0 + KEY_SIZE_LENGTH
KEY_OFFSET_V1 = KEY_SIZE_OFFSET_V1 + KEY_SIZE_LENGTH
VALUE_SIZE_LENGTH = 4
HEADER_SIZE_V0 = LEGACY_CRC_LENGTH + LEGACY_MAGIC_LENGTH + LEGACY_ATTRIBUTES_LENGTH
HEADER_SIZE_V1 = HEADER_SIZE_V0 + LEGACY_TIMESTAMP_LENGTH
RECORD_OVERHEAD_V0 = HEADER_SIZE_V0 + KEY_SIZE_LENGTH + VALUE_SIZE_LENGTH
RECORD_OVERHEAD_V1 = HEADER_SIZE_V1 + KEY_SIZE_LENGTH + VALUE_SIZE_LENGTH
V1_MINUS_V0_SIZE = HEADER_SIZE_V1 - HEADER_SIZE_V0  # the v1 timestamp field
# The smallest size field a reader accepts (FileLogInputStream): a v0 message with null key and value.
MIN_MESSAGE_SIZE = RECORD_OVERHEAD_V0

# ---------------------------------------------------------------- v2 batch (DefaultRecordBatch.java)

BASE_OFFSET_OFFSET = 0
BASE_OFFSET_LENGTH = 8
LENGTH_OFFSET = BASE_OFFSET_OFFSET + BASE_OFFSET_LENGTH
LENGTH_LENGTH = 4
PARTITION_LEADER_EPOCH_OFFSET = LENGTH_OFFSET + LENGTH_LENGTH
PARTITION_LEADER_EPOCH_LENGTH = 4
# MAGIC_OFFSET and MAGIC_LENGTH of Records.java: PARTITION_LEADER_EPOCH_OFFSET + PARTITION_LEADER_EPOCH_LENGTH
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
RECORDS_OFFSET = RECORDS_COUNT_OFFSET + RECORDS_COUNT_LENGTH
RECORD_BATCH_OVERHEAD = RECORDS_OFFSET

# ---------------------------------------------------------------- positions in a v0/v1 log entry

# The message starts after LOG_OVERHEAD; the compiled walkers address the entry, not the message.
LEGACY_CRC_AT = LOG_OVERHEAD + LEGACY_CRC_OFFSET
LEGACY_MAGIC_AT = LOG_OVERHEAD + LEGACY_MAGIC_OFFSET  # the CRC covers [magic, end of message)
LEGACY_ATTRIBUTES_AT = LOG_OVERHEAD + LEGACY_ATTRIBUTES_OFFSET
V1_TIMESTAMP_AT = LOG_OVERHEAD + LEGACY_TIMESTAMP_OFFSET
V0_KEY_LENGTH_AT = LOG_OVERHEAD + KEY_SIZE_OFFSET_V0
V1_KEY_LENGTH_AT = LOG_OVERHEAD + KEY_SIZE_OFFSET_V1
# magic, attributes and timestamp: what the CRC of a v1 message covers before its key length
V1_HEAD = KEY_SIZE_OFFSET_V1 - LEGACY_MAGIC_OFFSET

# ---------------------------------------------------------------- attributes (docs/formats.md §1.9, §2.1)

LEGACY_CODEC_MASK = 0x07
LEGACY_TIMESTAMP_TYPE_MASK = 0x08  # bit 3, v1 only
V2_CODEC_MASK = 0x07
V2_TIMESTAMP_TYPE_MASK = 0x08
V2_MAX_CODEC = 4  # zstd
LEGACY_MAX_CODEC = 3  # lz4: zstd is refused below magic 2

# ---------------------------------------------------------------- the digest's record head (digest.py)

DIGEST_OFFSET_LENGTH = 8  # offset int64
DIGEST_HEADER_COUNT_LENGTH = 4  # header count int32
RECORD_HEAD = DIGEST_OFFSET_LENGTH + DIGEST_HEADER_COUNT_LENGTH

# A timestamp delta (varlong) or a base this close to the int64 limits may leave int64; the fast
# walks (``_pycore.py`` and its compiled twins) refuse such a batch and the careful decoder
# decides. Offset deltas are varints of at most 5 bytes, so |delta| <= 2**34 always.
SAFE_DELTA = 2**34
