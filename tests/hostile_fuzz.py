"""The harness of the hostile-GGUF fuzz: seeds (real headers), mutations, and one attack on
the validator with a time limit and a memory bound.

A seed is a real header: the starter model's (its first bytes only; the 241 MiB of weights
are never read: the rest of the file is a run of zeros served on demand by VirtualFile), the
starter's with its tokenizer cut to 64 entries (same keys and tensor table, parsed in
milliseconds rather than the ~50 ms the 262,144 tokens take), and factory files' headers.

Memory: a read may hold at most 3x the header bytes it was served (the prefix it has, the
chunk it reads next and the two joined, `data += more` in read_header_from) plus
PARSED_LIMIT for what it decodes. Every attack checks that against the process's peak
resident memory (PeakMemory: the kernel's high-water mark, lowered to the memory held just
before the read); a traced attack (every TRACE_EVERY-th case) also against tracemalloc's
peak, which counts every byte allocated, touched or not, but makes the read 4.4x slower.
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import signal
import struct
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from app.models.gguf_header import GgufHeader
from app.models.gguf_read import read_header_from
from app.platform.errors import AppError, InvalidGgufError
from tests.hostile_gguf import Field, header_layout

CASE_LIMIT_S = 10.0  # a hang: far past the slowest real header (the starter's, ~0.1 s)
MIB = 1024 * 1024
# What the parse may hold besides 3x the header bytes it read: one string of up to 1 MiB
# (MAX_STRING_BYTES) decoded with U+FFFD for every bad byte (2 bytes a character), the
# keys, values and tensor table parsed (a few thousand objects), an allocator arena or two
# (1 MiB each). The fuzz's worst case holds about half of the whole bound (the share is on
# the reliability page): 'factory-bytes:100', 4,390 bytes of which 1.2 MB end up read.
PARSED_LIMIT = 4 * MIB
# tracemalloc on every 4th case by number (a quarter of each test's cases, every outcome
# class among them: test_gguf_fuzz checks that); the resident-memory check on every case.
TRACE_EVERY = 4

INTERESTING = (
    0,
    1,
    2,
    3,
    4,
    8,
    9,
    12,
    13,
    31,
    32,
    42,
    43,
    63,
    64,
    255,
    256,
    511,
    512,
    513,
    4095,
    4096,
    4097,
    65_535,
    65_536,
    2**31 - 1,
    2**31,
    2**32 - 1,
    2**32,
    2**40,
    2**62,
    2**63 - 1,
    2**63,
    2**64 - 1,
)
FLOATS = (math.nan, math.inf, -math.inf, 0.0, -1.0, 1e38, 5e-324)


@dataclass(frozen=True)
class Seed:
    name: str
    data: bytes  # the header (and, for factory files, the whole file)
    total: int  # the file's size: past `data` it is zeros
    fields: tuple[Field, ...]
    header_end: int


def make_seed(name: str, data: bytes, total: int) -> Seed:
    layout = header_layout(data)
    return Seed(name, data, total, layout.fields, layout.header_end)


class VirtualFile:
    """A file of `total` bytes: `data`, then zeros (the tensor data nobody reads)."""

    def __init__(self, data: bytes, total: int) -> None:
        self.data, self.total, self.pos, self.served = data, total, 0, 0

    def read(self, n: int = -1) -> bytes:
        end = self.total if n < 0 else min(self.total, self.pos + n)
        head = self.data[self.pos : end]
        out = head + bytes(end - self.pos - len(head)) if len(head) < end - self.pos else head
        self.pos = end
        self.served += len(out)
        return out


class CaseHung(BaseException):
    """A case ran past CASE_LIMIT_S (BaseException: no `except Exception` swallows it)."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def expired(_signum: int, _frame: object) -> None:
        raise CaseHung(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def use(header: GgufHeader, total: int) -> None:
    """What the app computes from an accepted header (the Models page's verdicts, `kvstudio
    fit`, the library's row): none of it may fail on a header the validator let through."""
    from app.kv.fit import estimate_fit
    from app.kv.kv_layout import kv_layout
    from app.platform.probes import FreeMemory

    _ = (header.quantization, header.vocab_size, header.parameter_count, header.context_length)
    _ = (header.name, header.architecture, header.sliding_window_pattern, header.data_end)
    kv_layout(header)
    try:
        estimate_fit(header, total, 4096, FreeMemory(8 << 30, "test", "test", True))
    except AppError:
        pass  # e.g. no KV mode fits the head size: a sentence, as for any real model


_MAXRSS_UNIT = 1 if sys.platform == "darwin" else 1024


class PeakMemory:
    """The process's peak resident memory (getrusage's ru_maxrss: a high-water mark the
    kernel keeps, so no spike between two looks is missed), lowered to the memory held now
    before each read where Linux allows it (5 written to /proc/self/clear_refs): then a
    read's rise is its own. Where it does not (`resets` False), a read's rise is over the
    highest mark before it, which can hide a rise but never invent one."""

    def __init__(self) -> None:
        try:
            self._clear_refs: int | None = os.open("/proc/self/clear_refs", os.O_WRONLY)
        except OSError:
            self._clear_refs = None
        self.resets = self._clear_refs is not None

    def mark(self) -> int:
        """Reset the high-water mark (where allowed) and return it, in bytes."""
        if self._clear_refs is not None:
            try:
                os.write(self._clear_refs, b"5")
            except OSError:
                self.close()
        return self.peak()

    @staticmethod
    def peak() -> int:
        """The high-water mark in bytes (ru_maxrss counts KiB, bytes on macOS)."""
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * _MAXRSS_UNIT

    def close(self) -> None:
        if self._clear_refs is not None:
            os.close(self._clear_refs)
            self._clear_refs = None
            self.resets = False


def memory_bound(served: int) -> int:
    """The most a read of `served` header bytes may hold (module docstring)."""
    return 3 * served + PARSED_LIMIT


@dataclass
class Tally:
    """What a run of attacks did: outcomes by class (all, and those traced with tracemalloc),
    the worst time, and the worst memory as a share of its bound."""

    outcomes: Counter[str] = field(default_factory=Counter)
    traced: Counter[str] = field(default_factory=Counter)
    tried: int = 0
    slowest_s: float = 0.0
    worst_resident: float = 0.0  # the highest resident-memory rise / memory_bound(served)
    worst_traced: float = 0.0  # the highest tracemalloc peak / memory_bound(served)
    resets: bool = True  # every read's high-water mark was reset before it

    def add(self, outcome: str, seconds: float, served: int, rise: int, peak: int | None) -> None:
        self.tried += 1
        self.outcomes[outcome] += 1
        self.slowest_s = max(self.slowest_s, seconds)
        self.worst_resident = max(self.worst_resident, rise / memory_bound(served))
        if peak is not None:
            self.traced[outcome] += 1
            self.worst_traced = max(self.worst_traced, peak / memory_bound(served))

    def merge(self, other: Tally) -> None:
        self.outcomes += other.outcomes
        self.traced += other.traced
        self.tried += other.tried
        self.slowest_s = max(self.slowest_s, other.slowest_s)
        self.worst_resident = max(self.worst_resident, other.worst_resident)
        self.worst_traced = max(self.worst_traced, other.worst_traced)
        self.resets = self.resets and other.resets


def attack(data: bytes, total: int, tally: Tally, memory: PeakMemory, traced: bool) -> str:
    """Read `data` (a file of `total` bytes, zeros past `data`) as the app reads a local
    file, and use what is accepted. Returns 'accepted' or the refusal's kind; anything else
    (another exception, a hang, memory beyond memory_bound) fails the caller's test. The
    memory measures are only around the read: the fit arithmetic after it is not the
    reader's. `traced`: tracemalloc as well."""
    source = VirtualFile(data, total)
    started = time.perf_counter()
    header = None
    peak = None
    with time_limit(CASE_LIMIT_S):
        before = memory.mark()
        if traced:
            tracemalloc.start()
        try:
            header = read_header_from(source, total, "case", first_read=max(len(data), 24))
            outcome = "accepted"
        except InvalidGgufError as error:
            assert "\n" not in str(error) and str(error), repr(error)
            outcome = error.kind
        finally:
            if traced:
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
            rise = memory.peak() - before
        if header is not None:
            use(header, total)
    seconds = time.perf_counter() - started
    bound = memory_bound(source.served)
    assert rise <= bound, f"resident memory rose {rise:,} bytes reading {source.served:,}"
    assert peak is None or peak <= bound, f"tracemalloc peak {peak:,} reading {source.served:,}"
    tally.resets = tally.resets and memory.resets
    tally.add(outcome, seconds, source.served, rise, peak)
    return outcome


# ---- mutations ----------------------------------------------------------------------------


def overwrite(data: bytes, f: Field, value: int | float) -> bytes:
    if isinstance(value, float):
        raw = struct.pack("<d" if f.size == 8 else "<f", value) if f.size in (4, 8) else b""
        raw = raw or (int(value) % 256 if math.isfinite(value) else 255).to_bytes(f.size, "little")
    else:
        raw = (value % 2 ** (8 * f.size)).to_bytes(f.size, "little")
    return data[: f.offset] + raw + data[f.offset + f.size :]


def byte_edit(data: bytes, op: str, pos: int, blob: bytes) -> tuple[bytes, int | None]:
    """One raw edit; returns the new bytes and, for a cut, the new file size."""
    pos = min(pos, len(data))
    if op == "set":
        return data[:pos] + blob + data[pos + len(blob) :], None
    if op == "insert":
        return data[:pos] + blob + data[pos:], None
    if op == "delete":
        return data[:pos] + data[pos + max(1, len(blob)) :], None
    return data[:pos], pos  # "cut": the file ends here
