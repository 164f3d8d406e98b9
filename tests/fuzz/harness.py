"""The fuzz harness: mutation strategies over a seed corpus, the time and hang guards, the
quick and long profiles, and saving failing inputs into the corpus.

A *target* is one parser entry point. Its ``run(data, kind)`` feeds the bytes to the parser
the way the project reads that file; ``kind`` is the corpus file name the input was derived
from (a file name, codec or base offset the parser needs). Inside ``run``, calls that may
legitimately reject the input go through :func:`attempt`, which swallows the project's
format errors (:class:`KafkaFormatError` and subclasses) and nothing else. Any exception that
escapes ``run`` is a defect, and so is an example slower than the deadline (a hang).

Inputs are a corpus file (``tests/fuzz/corpus/<target>/``) mutated by byte flips, byte
writes, truncations, deletions, insertions, repeated runs, splices from other seeds and
integer/varint writes over length fields, optionally followed by a fix-up (CRCs, frame
lengths) so the mutation reaches the parser behind the checksum; or fully random bytes.

Profiles (``KMIGRATE_FUZZ``): ``quick`` (default, what ``make test`` runs: a fixed number of
examples a target, about 1.5 s each) and ``long`` (``make fuzz``: rounds of examples until the
target's share of ``KMIGRATE_FUZZ_SECONDS``, default 300, is spent). A failing input is
written to the corpus as ``crash-<sha1>--<seed name>`` so it is replayed on every later run.
See docs/testing.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import resource
import signal
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase

from migration.formats.errors import KafkaFormatError
from migration.formats.varint import encode_unsigned_varint, encode_varint

FUZZ_DIR = Path(__file__).resolve().parent
CORPUS_DIR = FUZZ_DIR / "corpus"
# Hypothesis' own example database (ignored by git): failing examples are replayed first.
DATABASE_DIR = CORPUS_DIR / ".hypothesis"

MODE_ENV = "KMIGRATE_FUZZ"  # "quick" (default) or "long"
SECONDS_ENV = "KMIGRATE_FUZZ_SECONDS"  # total budget of a long run
DEFAULT_SECONDS = 300.0
MODE = os.environ.get(MODE_ENV, "quick").strip().lower() or "quick"
if MODE not in ("quick", "long"):
    raise RuntimeError(f"{MODE_ENV} must be 'quick' or 'long', not {MODE!r}")

DEADLINE = timedelta(seconds=2)  # per example: slower is a hang
HARD_TIMEOUT_S = 10.0  # SIGALRM guard: an example that never returns fails instead of blocking
# An example may grow the address space by this much, no more: Python code then gets a
# MemoryError (a defect) instead of swapping. Native code aborts the process instead (Rust's
# allocator does), so this stays above what the codec libraries reserve for a valid frame.
MEMORY_HEADROOM = 2 << 30
MAX_INPUT = 1 << 16  # mutations never grow an input beyond this
RANDOM_MAX = 2048  # size of fully random inputs
MAX_ROUND = 2000  # examples of one Hypothesis run in a long fuzz; the time is checked between runs
CRASH_PREFIX = "crash-"
CRASH_SEPARATOR = "--"

_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example,
           HealthCheck.filter_too_much]
settings.register_profile(
    "kmigrate-fuzz-quick", deadline=DEADLINE, suppress_health_check=_HEALTH, print_blob=True,
    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink), report_multiple_bugs=False,
)
settings.register_profile(
    "kmigrate-fuzz-long", deadline=DEADLINE, suppress_health_check=_HEALTH, print_blob=True,
    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink), report_multiple_bugs=False,
)
PROFILE = settings.get_profile(f"kmigrate-fuzz-{MODE}")

# Set by tests/fuzz/conftest.py: how many fuzz tests this session runs (they share the budget).
SELECTED_TARGETS = 0

T = TypeVar("T")


class FuzzHang(Exception):
    """An example that did not return within :data:`HARD_TIMEOUT_S`."""


def attempt(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
    """``fn(*args, **kwargs)``, or None when it rejects the input with a format error."""
    try:
        return fn(*args, **kwargs)
    except KafkaFormatError:
        return None


def outcome(fn: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T | None, KafkaFormatError | None]:
    """(result, None) or (None, the format error): for differential checks."""
    try:
        return fn(*args, **kwargs), None
    except KafkaFormatError as exc:
        return None, exc


# --------------------------------------------------------------------------- guards


@contextlib.contextmanager
def hard_timeout(seconds: float) -> Iterator[None]:
    """Raise :class:`FuzzHang` in the main thread after ``seconds`` (pure-Python loops only:
    a signal cannot interrupt C code, the Makefile's ``timeout`` covers that)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def on_alarm(signum: int, frame: object) -> None:
        raise FuzzHang(f"no result after {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _address_space() -> int:
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


@contextlib.contextmanager
def memory_cap(headroom: int) -> Iterator[None]:
    """Cap the address space at its current size + ``headroom`` so a parser that allocates
    from a corrupt length field raises MemoryError (a defect) instead of swapping."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = _address_space() + headroom
    except (OSError, ValueError):
        yield
        return
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if soft != resource.RLIM_INFINITY and soft <= cap:
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


# --------------------------------------------------------------------------- mutations

_INTERESTING: dict[int, tuple[int, ...]] = {
    1: (0, 1, 0x7F, 0x80, 0xFF),
    2: (0, 1, 0x7FFF, 0x8000, 0xFFFF),
    4: (0, 1, 13, 14, 61, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF),
    8: (0, 1, 0x7FFF_FFFF, 0x8000_0000, 0x7FFF_FFFF_FFFF_FFFF, 0x8000_0000_0000_0000, 0xFFFF_FFFF_FFFF_FFFF),
}
_VARINTS = (-2, -1, 0, 1, 63, 64, 8191, 8192, 2**31 - 1, -(2**31), 2**63 - 1)


def _position(draw: Any, buf: bytearray, hot: Sequence[int], *, end: bool = False) -> int:
    limit = len(buf) if end else max(len(buf) - 1, 0)
    if hot and draw(st.booleans()):
        return min(draw(st.sampled_from(hot)), limit)
    return draw(st.integers(0, limit))


def _op_flip(draw: Any, buf: bytearray, hot: Sequence[int], seeds: Sequence[bytes]) -> None:
    if buf:
        buf[_position(draw, buf, hot)] ^= 1 << draw(st.integers(0, 7))


def _op_set_byte(draw: Any, buf: bytearray, hot: Sequence[int], seeds: Sequence[bytes]) -> None:
    if buf:
        buf[_position(draw, buf, hot)] = draw(st.sampled_from(_INTERESTING[1]) | st.integers(0, 255))


def _op_truncate(draw: Any, buf: bytearray, hot: Sequence[int], seeds: Sequence[bytes]) -> None:
    del buf[_position(draw, buf, hot, end=True):]


def _op_delete(draw: Any, buf: bytearray, hot: Sequence[int], seeds: Sequence[bytes]) -> None:
    at = _position(draw, buf, hot, end=True)
    del buf[at : at + draw(st.integers(1, 32))]


def _op_insert(draw: Any, buf: bytearray, hot: Sequence[int], seeds: Sequence[bytes]) -> None:
    at = _position(draw, buf, hot, end=True)
    buf[at:at] = draw(st.binary(min_size=1, max_size=16))


def _op_repeat(draw: Any, buf: bytearray, hot: Sequence[int], seeds: Sequence[bytes]) -> None:
    """Repeat a slice many times: long lines, long digit strings, many entries."""
    if not buf:
        return
    at = _position(draw, buf, hot)
    piece = bytes(buf[at : at + draw(st.integers(1, 16))])
    times = draw(st.integers(1, 5000))
    times = min(times, (MAX_INPUT - len(buf)) // len(piece))
    buf[at:at] = piece * times


def _op_splice(draw: Any, buf: bytearray, hot: Sequence[int], seeds: Sequence[bytes]) -> None:
    """Copy a slice of another seed (or of this input) over or into this input."""
    donor = draw(st.sampled_from(seeds)) if seeds else bytes(buf)
    if not donor:
        return
    start = draw(st.integers(0, len(donor) - 1))
    piece = donor[start : start + draw(st.integers(1, 256))]
    at = _position(draw, buf, hot, end=True)
    if draw(st.booleans()):
        buf[at : at + len(piece)] = piece
    else:
        buf[at:at] = piece


def _op_integer(draw: Any, buf: bytearray, hot: Sequence[int], seeds: Sequence[bytes]) -> None:
    """Overwrite a big- or little-endian integer (a length, count, offset or magic field)."""
    width = draw(st.sampled_from((1, 2, 4, 8)))
    if len(buf) < width:
        return
    at = min(_position(draw, buf, hot), len(buf) - width)
    big = draw(st.booleans()) or width == 1
    old = int.from_bytes(buf[at : at + width], "big" if big else "little")
    choice = draw(st.integers(0, 3))
    if choice == 0:
        value = draw(st.sampled_from(_INTERESTING[width]))
    elif choice == 1:
        value = old + draw(st.integers(-8, 8))
    elif choice == 2:
        value = len(buf) + draw(st.integers(-16, 16))
    else:
        value = draw(st.integers(0, (1 << (8 * width)) - 1))
    value %= 1 << (8 * width)
    buf[at : at + width] = value.to_bytes(width, "big" if big else "little")


def _op_varint(draw: Any, buf: bytearray, hot: Sequence[int], seeds: Sequence[bytes]) -> None:
    """Write a (zig-zag or unsigned) varint over or into the input: v2 record and schema fields."""
    n = draw(st.sampled_from(_VARINTS) | st.integers(-(2**63), 2**63 - 1))
    raw = encode_varint(n) if draw(st.booleans()) else encode_unsigned_varint(n % (1 << 64))
    if draw(st.booleans()) and draw(st.booleans()):
        raw = bytes([0xFF]) * draw(st.integers(1, 11))  # an over-long varint
    at = _position(draw, buf, hot, end=True)
    if draw(st.booleans()):
        buf[at : at + len(raw)] = raw
    else:
        buf[at:at] = raw


_OPS = (_op_flip, _op_set_byte, _op_truncate, _op_delete, _op_insert, _op_integer, _op_varint, _op_repeat,
        _op_splice)


# --------------------------------------------------------------------------- targets


def crash_name(data: bytes, kind: str) -> str:
    return f"{CRASH_PREFIX}{hashlib.sha1(data).hexdigest()[:12]}{CRASH_SEPARATOR}{kind}"


def kind_of(name: str) -> str:
    """The seed name a corpus file stands for (a saved failure keeps its seed's name)."""
    if name.startswith(CRASH_PREFIX) and CRASH_SEPARATOR in name:
        return name.split(CRASH_SEPARATOR, 1)[1]
    return name


@dataclass
class Target:
    """One fuzz target: a parser entry point and its corpus directory."""

    name: str
    run: Callable[[bytes, str], None]
    # Fix-ups applied (half the time) after mutating: recompute CRCs, lengths, counts.
    fixups: tuple[Callable[[bytes], bytes], ...] = ()
    # Positions worth mutating (field starts) of a seed, e.g. length fields of every batch.
    hot: Callable[[bytes], list[int]] | None = None
    # Examples of one quick run (make test); the long run is bounded by time instead.
    quick_examples: int = 60
    # Parses every seed of the corpus without error (checked on replay: seeds stay valid).
    seed_check: Callable[[bytes, str], object] | None = None
    _seeds: list[tuple[str, bytes]] | None = field(default=None, repr=False)
    _hot: dict[str, list[int]] = field(default_factory=dict, repr=False)
    _last_input: tuple[str, bytes] | None = field(default=None, repr=False)

    @property
    def corpus_dir(self) -> Path:
        return CORPUS_DIR / self.name

    def corpus_names(self) -> list[str]:
        return sorted(p.name for p in self.corpus_dir.iterdir() if p.is_file() and not p.name.startswith("."))

    def seeds(self) -> list[tuple[str, bytes]]:
        """The valid seeds (saved failures are replayed, not mutated)."""
        if self._seeds is None:
            self._seeds = [(n, (self.corpus_dir / n).read_bytes()) for n in self.corpus_names()
                           if not n.startswith(CRASH_PREFIX)]
            if not self._seeds:
                raise RuntimeError(f"no seed in {self.corpus_dir}")
        return self._seeds

    def hot_positions(self, name: str, data: bytes) -> list[int]:
        if self.hot is None:
            return []
        if name not in self._hot:
            self._hot[name] = sorted({p for p in self.hot(data) if 0 <= p < max(len(data), 1)})
        return self._hot[name]

    # -- one input

    def check(self, name: str, data: bytes) -> None:
        """Run the target on one input; any exception escaping is a defect."""
        # Hypothesis replays the shrunk failing example last (also for a missed deadline,
        # which it raises after the call returns): the last input is the one to keep.
        self._last_input = (name, data)
        with memory_cap(MEMORY_HEADROOM), hard_timeout(HARD_TIMEOUT_S):
            self.run(data, kind_of(name))

    def replay(self, name: str) -> None:
        data = (self.corpus_dir / name).read_bytes()
        if self.seed_check is not None and not name.startswith(CRASH_PREFIX):
            self.seed_check(data, name)  # a seed must be valid: mutations start from real files
        self.check(name, data)

    def tests(self) -> tuple[Callable[..., None], Callable[[], None]]:
        """The two pytest tests of a target module: ``test_corpus, test_fuzz = TARGET.tests()``
        (replay each corpus file; fuzz for the profile's budget)."""
        import pytest

        @pytest.mark.parametrize("name", self.corpus_names())
        def test_corpus(name: str) -> None:
            self.replay(name)

        def test_fuzz() -> None:
            self.fuzz()

        return test_corpus, test_fuzz

    # -- generation

    def inputs(self) -> st.SearchStrategy[tuple[str, bytes]]:
        seeds = self.seeds()
        donors = [d for _, d in seeds]

        @st.composite
        def mutated(draw: Any) -> tuple[str, bytes]:
            name, data = draw(st.sampled_from(seeds))
            if draw(st.integers(0, 15)) == 15:
                return name, draw(st.binary(max_size=RANDOM_MAX))
            buf = bytearray(data)
            hot = self.hot_positions(name, data)
            for _ in range(draw(st.integers(1, 4))):
                draw(st.sampled_from(_OPS))(draw, buf, hot, donors)
                del buf[MAX_INPUT:]
            out = bytes(buf)
            if self.fixups and draw(st.booleans()):
                out = draw(st.sampled_from(self.fixups))(out)
            return name, out

        return mutated()

    def _round(self, max_examples: int) -> None:
        def fuzz_one(case: tuple[str, bytes]) -> None:
            self.check(*case)

        db = DirectoryBasedExampleDatabase(str(DATABASE_DIR / self.name))
        test = settings(PROFILE, max_examples=max_examples, database=db)(given(case=self.inputs())(fuzz_one))
        self._last_input = None
        try:
            test()
        except Exception:  # not KeyboardInterrupt: an interrupted run found nothing
            self._save_failure()
            raise

    def _save_failure(self) -> None:
        """Keep the failing input as ``crash-<sha1>--<seed name>`` in the corpus."""
        if self._last_input is None:
            return
        name, data = self._last_input
        known = {hashlib.sha1((self.corpus_dir / n).read_bytes()).digest() for n in self.corpus_names()}
        if hashlib.sha1(data).digest() in known:
            return
        path = self.corpus_dir / crash_name(data, kind_of(name))
        path.write_bytes(data)
        print(f"\nfuzz target {self.name}: failing input saved to {path.relative_to(FUZZ_DIR.parents[1])}")

    def fuzz(self) -> None:
        """The quick run (a fixed number of examples) or the long one (bounded in time)."""
        seeds = self.seeds()
        self.check(*seeds[0])  # warm-up: schema loading and imports stay out of the deadline
        if MODE == "quick":
            self._round(self.quick_examples)
            return
        budget = long_budget()
        start = time.monotonic()
        examples = 100
        while True:
            t0 = time.monotonic()
            self._round(examples)
            per_example = max((time.monotonic() - t0) / examples, 1e-4)
            remaining = budget - (time.monotonic() - start)
            if remaining <= per_example * 20:
                return
            # Short rounds keep the overshoot small (Hypothesis slows down as a run grows).
            examples = int(min(max(remaining / per_example * 0.8, 20), MAX_ROUND))


def long_budget() -> float:
    """Seconds of one target in a long run: an equal share of ``KMIGRATE_FUZZ_SECONDS``."""
    total = float(os.environ.get(SECONDS_ENV, DEFAULT_SECONDS))
    return total / max(SELECTED_TARGETS, 1)


# --------------------------------------------------------------------------- fix-ups and hot spots

_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")


def frames(data: bytes) -> Iterator[tuple[int, int, int]]:
    """(position, size field, magic) of every log entry or batch whose frame fits."""
    pos = 0
    while len(data) - pos > 17:
        (size,) = _I32.unpack_from(data, pos + 8)
        if size < 14 or pos + 12 + size > len(data):
            return
        yield pos, size, data[pos + 16]
        pos += 12 + size


def frame_hot(data: bytes) -> list[int]:
    """Header fields of every frame: size, leader epoch/crc, magic, attributes, counts."""
    out = []
    for pos, _size, magic in frames(data):
        out += [pos, pos + 8, pos + 12, pos + 16, pos + 17]
        if magic == 2:
            out += [pos + 21, pos + 22, pos + 23, pos + 27, pos + 43, pos + 51, pos + 53, pos + 57, pos + 61, pos + 62]
        else:
            out += [pos + 18, pos + 22, pos + 26, pos + 30]
    return out


def fix_frame_lengths(data: bytes) -> bytes:
    """Make the frame that overruns the data end exactly at the end (framing after an insert
    or a truncation), so the parser reads into the changed frame."""
    buf = bytearray(data)
    pos = 0
    while len(buf) - pos > 17:
        (size,) = _I32.unpack_from(buf, pos + 8)
        if size < 14 or pos + 12 + size > len(buf):
            _I32.pack_into(buf, pos + 8, len(buf) - pos - 12)
            break
        pos += 12 + size
    return bytes(buf)


def fix_crcs(data: bytes) -> bytes:
    """Recompute the CRC of every frame: CRC-32C of a v2 batch, CRC-32 of a v0/v1 message."""
    import zlib

    import crc32c

    buf = bytearray(data)
    for pos, size, magic in frames(data):
        end = pos + 12 + size
        if magic == 2 and size >= 49:
            _U32.pack_into(buf, pos + 17, crc32c.crc32c(bytes(buf[pos + 21 : end])))
        elif magic in (0, 1):
            _U32.pack_into(buf, pos + 12, zlib.crc32(bytes(buf[pos + 16 : end])))
    return bytes(buf)


def fix_lengths_and_crcs(data: bytes) -> bytes:
    return fix_crcs(fix_frame_lengths(data))
