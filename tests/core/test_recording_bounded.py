"""A dashboard left open for days: the live recording stays bounded and keeps every peak."""

from __future__ import annotations

import pytest

from app.platform.recording import (
    MAX_POINTS,
    THINNED_SECONDS,
    THINNING_SLACK,
    MemoryPoint,
    Recording,
)

# Over a second per test on 2 cores: in the full suite, not the fast tier (docs/testing.md).
pytestmark = pytest.mark.slow


def test_a_day_of_samples_stays_bounded_and_keeps_its_peaks(reliability) -> None:
    recording = Recording.new("psutil", "CPU")
    day = 24 * 3600 * 10  # ten samples a second
    spikes = {1_000: 9_000, 400_000: 8_000, day - 5: 7_000}  # early, middle, just now
    for i in range(day):
        recording.add_point(MemoryPoint(i / 10, spikes.get(i, 100 + i % 7), 10_000, None, i % 5))
    points = recording.points
    older_than_an_hour = 23 * 3600 / THINNED_SECONDS
    assert (
        len(points) <= MAX_POINTS + THINNING_SLACK + older_than_an_hour + 1
    )  # was one point per sample: 864,000
    assert [p.t for p in points] == sorted(p.t for p in points)  # still a time axis
    assert recording.peak().used_bytes == 9_000 and recording.peak().t == 100.0
    assert recording.peak(39_000, 41_000).used_bytes == 8_000
    assert points[-1].t == (day - 1) / 10  # the newest samples at full resolution
    assert recording.peak_device() == 4
    reliability.record(
        "Long sessions",
        "dashboard recording over a day of samples (864,000)",
        f"{len(points):,} points kept, every peak kept",
    )
