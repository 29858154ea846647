"""Numbers as a user reads them, in one place for the GUI and the CLI: byte sizes in binary
units (KiB, MiB, GiB: powers of 1024, everywhere), parameter and download counts, context
lengths, durations, dates; and sizes typed by a user, read back."""

from __future__ import annotations

import re
import struct
from datetime import UTC, datetime

from app.platform.errors import BadInputError

_BINARY = ("B", "KiB", "MiB", "GiB", "TiB")
_TYPED = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1024,
    "m": 1000**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1000**3,
    "gb": 1000**3,
    "gib": 1024**3,
    "t": 1000**4,
    "tb": 1000**4,
    "tib": 1024**4,
}


def size(n: float | None, digits: int = 2, unit: str | None = None) -> str:
    """512 -> '512 B', 1572864 -> '1.50 MiB'; `unit` ('GiB') fixes the unit."""
    if n is None:
        return "?"
    value = float(n)
    for name in _BINARY:
        if name == unit or (unit is None and (abs(value) < 1024 or name == _BINARY[-1])):
            return f"{value:,.0f} B" if name == "B" else f"{value:,.{digits}f} {name}"
        value /= 1024
    raise ValueError(f"unknown unit {unit!r}")


def gib(n_bytes: float, digits: int = 1) -> str:
    """In GiB whatever the size (sentences that compare two sizes)."""
    return size(n_bytes, digits, unit="GiB")


def mib(n_mib: float, digits: int = 2) -> str:
    """A figure already in MiB (llama.cpp logs MiB) as `size` writes it: 1234.5 ->
    '1,234.50 MiB'. (A float factor: text from a damaged file raises, never repeats.)"""
    return size(n_mib * float(1024**2), digits, unit="MiB")


def size_number(n_bytes: float, unit: str, digits: int = 1) -> str:
    """The number alone, in `unit`, with no thousands separator: (1572864, 'MiB') -> '1.5'
    (for 'x of y MiB', where the unit is written once)."""
    return f"{n_bytes / 1024 ** _BINARY.index(unit):.{digits}f}"


def size_figure(n_bytes: float, unit: str, digits: int = 1) -> str:
    """The figure alone, in `unit`, with thousands separators, as size() writes it:
    (1288490188.8, 'MiB') -> '1,228.8' (for a table whose heading names the unit)."""
    return size(n_bytes, digits, unit).removesuffix(f" {unit}")


def llama_mib(n_bytes: int) -> str:
    """Bytes as llama.cpp prints them in its logs: '%7.2f' of a C float (bytes / 1 MiB in
    float32), so a figure the app predicts can be compared with llama.cpp's own line."""
    # (float)bytes rounds to float32; dividing by 2**20 is then exact, so no further rounding.
    as_float32 = struct.unpack("<f", struct.pack("<f", float(n_bytes)))[0]
    return "%7.2f" % (as_float32 / (1024.0 * 1024.0))


def speed(bytes_per_s: float | None) -> str:
    return "" if not bytes_per_s else f"{size(bytes_per_s)}/s"


def parse_size(text: str) -> int:
    """Bytes in '24GiB', '24 GB', '512MiB', '1.5g' or '1000000' (what a user types: GB and
    G are powers of 1000, GiB of 1024). Raises BadInputError."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text or "")
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _TYPED:
        raise BadInputError(f"'{text}' is not a memory size; write it like 24GiB, 16GB or 8000MiB.")
    value = int(float(match.group(1)) * _TYPED[unit])
    if value <= 0:
        raise BadInputError(f"The memory size must be more than zero, not '{text}'.")
    return value


def parameters(n: int | None) -> str:
    """268098176 -> '268M', 8030261248 -> '8.0B'."""
    if not n:
        return "?"
    if n >= 1_000_000_000:
        return f"{n / 1e9:.1f}B"
    return f"{n / 1e6:.0f}M" if n >= 1_000_000 else f"{n / 1e3:.0f}K"


def count(n: int | None) -> str:
    """12345 -> '12.3k', 2_500_000 -> '2.5M'."""
    if n is None:
        return "?"
    for limit, suffix in ((1_000_000_000, "B"), (1_000_000, "M"), (1_000, "k")):
        if n >= limit:
            return f"{n / limit:.1f}{suffix}".replace(".0" + suffix, suffix)
    return str(n)


def tokens(n: int | None) -> str:
    """Context lengths: 131072 -> '128k', 4096 -> '4k', 1000 -> '1,000'."""
    if n is None:
        return "?"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024}k"
    return f"{n:,}"


def tokens_short(n: int | None) -> str:
    """Rounded down to whole k for tight table cells: 58112 -> '56k' (never overstated)."""
    if n is None:
        return "?"
    return f"{n // 1024}k" if n >= 1024 else str(n)


def duration(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return ""
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    if s >= 60:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s} s"


def when(value: datetime | str | None) -> str:
    """A date as '2026-11-03' (or 'today' / 'N days ago' when recent)."""
    if value is None:
        return ""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return str(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    days = (datetime.now(UTC) - value).days
    if days <= 0:
        return "today"
    if days == 1:
        return "yesterday"
    if days < 30:
        return f"{days} days ago"
    return value.strftime("%Y-%m-%d")
