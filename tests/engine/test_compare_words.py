"""The Compare run's words (app/engine/compare_words.py): quality figures are flagged when the
same-top-token share's 95% margin is wider than 2 points (derived from the scored tokens, so
the threshold moves with the share), and decode speed is called unchanged only within the
spread of the runs' own repetitions. Rows shaped as CompareResult.rows() writes them; the
dashboard and `kvstudio bench` tests check the same sentence on real runs."""

from __future__ import annotations

from app.engine.compare_result import COLUMNS
from app.engine.compare_words import (
    HEADINGS,
    agreement_margin_points,
    gain_sentence,
    tokens_needed,
    too_few_scored,
)


def rows(scored: int, top1: float, spread: float | None, k8_speed: float) -> list[dict]:
    ref = {
        "mode": "f16/f16",
        "kv_saving_mib": 0.0,
        "kv_saving_percent": 0.0,
        "peak_memory_mib": 364.0,
        "decode_tokens_per_second": 40.0,
        "decode_spread_percent": spread,
        "mean_kl_divergence": 0.0,
        "top1_agreement": 100.0,
        "scored_tokens": scored,
    }
    k8 = ref | {
        "mode": "q8_0/f16",
        "kv_saving_mib": 9.1,
        "kv_saving_percent": 23.4,
        "peak_saving_mib": 9.0,
        "decode_tokens_per_second": k8_speed,
        "mean_kl_divergence": 0.0093,
        "top1_agreement": top1,
    }
    return [ref, k8]


def test_the_sentence_says_memory_quality_and_speed_in_words() -> None:
    sentence = gain_sentence(rows(scored=2048, top1=95.1, spread=4.0, k8_speed=39.5))
    assert sentence == (
        "On this model int8-K saves 9.1 MiB of KV cache (23%), 2.5% of peak memory; "
        "quality: KL 0.009, 95% same top token; decode speed unchanged within noise "
        "(repetitions varied by 4%)."
    )


def test_a_speed_change_beyond_the_spread_is_named() -> None:
    sentence = gain_sentence(rows(scored=2048, top1=95.0, spread=2.0, k8_speed=32.0))
    assert sentence.endswith("decode speed 20% slower (repetitions varied by 2%).")
    one_run = gain_sentence(rows(scored=2048, top1=95.0, spread=None, k8_speed=39.5))
    assert "one repetition each, so its noise is unknown" in one_run


def test_too_few_scored_tokens_are_flagged_with_the_derived_threshold() -> None:
    # 95% same top token: +-2 points at 95% needs 1.96^2 * 0.95 * 0.05 / 0.02^2 = 457 tokens.
    assert tokens_needed(95.0) == 457
    assert agreement_margin_points(95.0, 457) <= 2.0 < agreement_margin_points(95.0, 456)
    few, enough = rows(128, 95.0, 3.0, 40.0), rows(1024, 95.0, 3.0, 40.0)
    assert too_few_scored(few[1]) and not too_few_scored(enough[1])
    assert "too few tokens scored to tell (128; 457 needed)" in gain_sentence(few)
    # A perfect share on a handful of tokens proves nothing either (rule of three).
    assert too_few_scored(rows(64, 100.0, 3.0, 40.0)[1])


def test_every_column_has_words_and_its_abbreviation_in_the_tooltip() -> None:
    for key, short, _ in COLUMNS:
        words, tip = HEADINGS[key]
        assert words != short and tip.startswith(short)
