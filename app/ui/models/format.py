"""Numbers as a user reads them: sizes, counts, speeds, durations, dates."""

from __future__ import annotations

from datetime import UTC, datetime

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def size(n: float | None) -> str:
    if n is None:
        return "?"
    value = float(n)
    for unit in _UNITS:
        if abs(value) < 1024 or unit == _UNITS[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{value:.2f} TiB"


def count(n: int | None) -> str:
    """12345 -> '12.3k', 2_500_000 -> '2.5M'."""
    if n is None:
        return "?"
    for limit, suffix in ((1_000_000_000, "B"), (1_000_000, "M"), (1_000, "k")):
        if n >= limit:
            return f"{n / limit:.1f}{suffix}".replace(".0" + suffix, suffix)
    return str(n)


def tokens(n: int | None) -> str:
    """Context lengths: 131072 -> '128k', 4096 -> '4k', 1000 -> '1000'."""
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


def speed(bytes_per_s: float | None) -> str:
    return "" if not bytes_per_s else f"{size(bytes_per_s)}/s"


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
