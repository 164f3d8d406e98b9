"""The CRC check both batch kinds share, a v2 batch (``record_batch.py``) and a v0/v1 entry
(``legacy.py``), as Kafka's ``isValid`` / ``ensureValid`` (DefaultRecordBatch.java,
AbstractLegacyRecordBatch.java). A module of its own so that neither format module takes its
base from the other."""

from __future__ import annotations

from typing import ClassVar

from migration.formats.errors import InvalidCrcError


class CrcChecked:
    """``compute_checksum`` against the stored ``crc``; a mismatch is an InvalidCrcError at the
    CRC field (``CRC_AT`` bytes into the entry), named by ``_crc_mismatch``."""

    __slots__ = ()
    CRC_AT: ClassVar[int]
    crc: int
    position: int

    def compute_checksum(self) -> int:
        raise NotImplementedError

    def _crc_mismatch(self) -> str:
        raise NotImplementedError

    def is_valid(self) -> bool:
        return self.compute_checksum() == self.crc

    def _ensure_crc(self) -> None:
        actual = self.compute_checksum()
        if actual != self.crc:
            raise InvalidCrcError(
                self._crc_mismatch(),
                position=self.position + self.CRC_AT,
                expected=f"{actual:#010x}",
                found=f"{self.crc:#010x}",
            )
