"""Numbers in Kafka's text files (checkpoints, ``meta.properties``, ``partition.metadata``) as
Kafka reads them: Java's ``Integer.parseInt`` / ``Long.parseLong``. An optional sign, ASCII
digits only (leading zeros allowed), within the type's range; anything else is not a number.
A number with more digits than the type has is out of range without being converted (Python's
``int()`` refuses strings of more than 4300 digits, and such a file is corrupt anyway)."""

from __future__ import annotations

import re

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def parse_java_int(text: str, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int | None:
    """The value of ``text`` when Java would parse it into ``[lo, hi]``, else None."""
    if not _JAVA_INT.fullmatch(text):
        return None
    digits = text.lstrip("+-").lstrip("0")
    if len(digits) > len(str(max(-lo, hi))):
        return None
    value = -int(digits or "0") if text[0] == "-" else int(digits or "0")
    return value if lo <= value <= hi else None


