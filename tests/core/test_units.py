"""Numbers as a user reads them (app/platform/units.py): one byte formatter, binary units
everywhere."""

from __future__ import annotations

import pytest

from app.platform.errors import BadInputError
from app.platform.units import parameters, parse_size, size

GIB = 1024**3
MIB = 1024**2


def test_sizes_are_binary_everywhere():
    assert [size(512), size(1536), size(3 * MIB // 2), size(7 * GIB + GIB // 2)] == [
        "512 B",
        "1.50 KiB",
        "1.50 MiB",
        "7.50 GiB",
    ]
    assert size(10**9) == "953.67 MiB"  # never "1.00 GB": a GB is not what the disk shows in GiB
    assert size(GIB // 2, 1, unit="GiB") == "0.5 GiB"


def test_parameter_counts():
    assert [parameters(268_098_176), parameters(8_030_261_248), parameters(None)] == [
        "268M",
        "8.0B",
        "?",
    ]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("24GiB", 24 * GIB),
        ("24 GB", 24 * 10**9),
        ("512MiB", 512 * MIB),
        ("1.5g", 1_500_000_000),
        ("1000000", 1_000_000),
        ("8000mib", 8000 * MIB),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "GiB", "24 parsecs", "-3GiB", "0", "1e9"])
def test_parse_size_refuses_nonsense(text):
    with pytest.raises(BadInputError):
        parse_size(text)
