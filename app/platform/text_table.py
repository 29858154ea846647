"""Plain-text tables whose columns are as wide as their widest cell (the CLI's tables)."""

from __future__ import annotations

from collections.abc import Collection, Sequence


def aligned_rows(
    rows: Sequence[Sequence[str]],
    right: Collection[int] = (),
    *,
    rule: bool = False,
    indent: str = "",
) -> list[str]:
    """`rows` of cells (the first row the header) as lines with columns two spaces apart;
    columns whose index is in `right` are right-aligned, the others left-aligned.
    `rule`: a line of dashes under the header."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        indent
        + "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
    if rule:
        lines.insert(1, indent + "  ".join("-" * w for w in widths))
    return lines
