"""A comparison's estimated duration and the time left as its steps end."""

from __future__ import annotations

import pytest

from app.engine.compare_estimate import CompareRates, compare_steps, rates_from_session

RATES = CompareRates(
    load_seconds=3.0, prompt_tokens_per_second=100.0, decode_tokens_per_second=10.0, source="t"
)


def test_steps_follow_the_settings() -> None:
    steps = compare_steps(
        RATES, depth=136, n_prompt=100, n_gen=9, repetitions=2, quality_chunks=1, chunk_tokens=80
    )
    assert steps.names[:3] == ("f16/f16: load", "f16/f16: speed", "f16/f16: quality")
    assert len(steps.names) == 9
    # speed: (136 + 64 warm-up + 2 x 100) / 100 + (1 + 2 x 9) / 10 = 4 + 1.9
    assert steps.seconds[:3] == pytest.approx((3.0, 5.9, 80 / 80))
    assert steps.total_seconds == pytest.approx(3 * 9.9)
    no_quality = compare_steps(RATES, quality_chunks=0, modes="q8_0/f16")
    assert no_quality.names == (
        "f16/f16: load",
        "f16/f16: speed",
        "q8_0/f16: load",
        "q8_0/f16: speed",
    )


def test_time_left_is_scaled_by_how_far_off_the_done_steps_were() -> None:
    steps = compare_steps(RATES, depth=0, n_prompt=36, n_gen=9, repetitions=1, quality_chunks=0)
    # each mode: load 3 s, speed (64 + 36) / 100 + 10 / 10 = 2 s; 3 modes = 15 s
    assert steps.total_seconds == pytest.approx(15.0)
    assert steps.seconds_left(0, 0.0) == pytest.approx(15.0)
    assert steps.done_fraction(2) == pytest.approx(5 / 15)
    # the first mode took 10 s instead of 5: the remaining 10 s are expected to take 20
    assert steps.seconds_left(2, 10.0) == pytest.approx(20.0)


def test_rates_say_where_they_came_from() -> None:
    measured = rates_from_session(250_000_000, 1.0, 200, 0.5, 30.0)
    assert (measured.prompt_tokens_per_second, measured.decode_tokens_per_second) == (400.0, 30.0)
    assert measured.source == "this model's load and last reply"
    short_prompt = rates_from_session(250_000_000, 1.0, 7, 0.1, 30.0)
    assert short_prompt.prompt_tokens_per_second == 300.0  # 7 tokens say nothing of batches
    guessed = rates_from_session(250_000_000)
    assert guessed.source == "the model's size (nothing measured yet)"
    assert guessed.decode_tokens_per_second == pytest.approx(20.0)
