"""The harness of the hostile-GGUF fuzz: seeds (real headers), mutations, and one attack on
the validator with a time limit and a memory measure.

A seed is a real header: the starter model's (its first bytes only; the 241 MiB of weights
are never read: the rest of the file is a run of zeros served on demand by VirtualFile), the
starter's with its tokenizer cut to 64 entries (same keys and tensor table, parsed in
milliseconds rather than the ~60 ms the 262,144 tokens take), and factory files' headers.
"""

from __future__ import annotations

import contextlib
import math
import signal
import struct
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
PARSED_LIMIT = 4 * MIB  # what the parse may hold besides the header bytes it read

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


@dataclass
class Tally:
    """What a run of attacks did: outcomes by class, the worst time and memory."""

    outcomes: Counter[str] = field(default_factory=Counter)
    tried: int = 0
    slowest_s: float = 0.0
    peak_over_read: int = 0  # the most the parse held beyond the header bytes read

    def add(self, outcome: str, seconds: float, peak: int, served: int) -> None:
        self.tried += 1
        self.outcomes[outcome] += 1
        self.slowest_s = max(self.slowest_s, seconds)
        self.peak_over_read = max(self.peak_over_read, peak - 3 * served)

    def merge(self, other: Tally) -> None:
        self.outcomes += other.outcomes
        self.tried += other.tried
        self.slowest_s = max(self.slowest_s, other.slowest_s)
        self.peak_over_read = max(self.peak_over_read, other.peak_over_read)


def attack(data: bytes, total: int, tally: Tally) -> str:
    """Read `data` (a file of `total` bytes, zeros past `data`) as the app reads a local
    file, and use what is accepted. Returns 'accepted' or the refusal's kind; anything else
    (another exception, a hang, memory beyond the bound) fails the caller's test."""
    source = VirtualFile(data, total)
    started = time.perf_counter()
    header = None
    with time_limit(CASE_LIMIT_S):
        tracemalloc.start()  # only around the read: the fit arithmetic after it is not the reader's
        try:
            header = read_header_from(source, total, "case", first_read=max(len(data), 24))
            outcome = "accepted"
        except InvalidGgufError as error:
            assert "\n" not in str(error) and str(error), repr(error)
            outcome = error.kind
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        if header is not None:
            use(header, total)
    seconds = time.perf_counter() - started
    # The header bytes it read (the read and its copies), plus a few MiB parsed: never more.
    assert peak <= 3 * source.served + PARSED_LIMIT, (peak, source.served)
    tally.add(outcome, seconds, peak, source.served)
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
