"""The Dashboard's lesson panel on the real starter model: its numbers are `kvstudio fit`'s for
the loaded context and K/V types, and the bytes one decode step reads follow the tokens of a
real reply."""

from __future__ import annotations

import json

from app.engine.messages import Generate, SamplingSettings
from app.kv.kv_cache import kv_cache_bytes
from app.kv.kv_types import DEFAULT_KV_MODE
from app.kv.lesson import FA_TILE, SCORE_BYTES, lesson_for, lesson_sentences
from app.models.gguf_read import read_gguf_header
from app.platform import units
from app.ui.dashboard.lesson_panel import lesson_bars
from app.ui.dashboard.page import DashboardPage
from tests.cli_runner import kvstudio
from tests.ui.conftest import LOAD_TIMEOUT_MS
from tests.waits import HANG_GUARD_MS


def test_the_lesson_shows_kvstudio_fit_s_numbers_and_follows_a_reply(
    qtbot, loaded_chat_app, starter_model_path
) -> None:
    window, engine = loaded_chat_app.window, loaded_chat_app.engine
    dashboard = window.findChild(DashboardPage)
    window.show_page("Dashboard")
    lesson = dashboard.lesson.lesson
    loaded = engine.loaded
    assert lesson is not None and loaded is not None
    fit = kvstudio(
        "fit",
        "starter",
        "--ctx",
        str(loaded.n_ctx),
        "--kv",
        loaded.options.kv.label,
        "--json",
        "--vram",
        "64GiB",
    )
    assert fit.returncode == 0, fit.stderr
    (mode,) = json.loads(fit.stdout)["modes"]
    assert (lesson.kv_bytes, lesson.fp16_kv_bytes) == (mode["kv_bytes"], mode["fp16_kv_bytes"])
    assert lesson.saving_bytes == mode["saving_bytes"] > 0
    full = [c for c in mode["caches"] if c["cells"] == loaded.n_ctx]  # the context-long caches
    assert lesson.kv_bytes_per_token == sum(c["total_bytes"] // c["cells"] for c in full)
    heads = read_gguf_header(starter_model_path).head_count
    assert lesson.score_matrix_bytes == loaded.n_ctx**2 * heads * SCORE_BYTES
    assert lesson.tile_bytes == FA_TILE * FA_TILE * SCORE_BYTES
    text = dashboard.lesson.text.text()
    for n_bytes in (lesson.kv_bytes, lesson.fp16_kv_bytes, lesson.score_matrix_bytes):
        assert units.size(n_bytes, 1) in text
    assert lesson.tokens == 0 and "No tokens are in the context yet" in text

    with qtbot.waitSignal(engine.reply_finished, timeout=LOAD_TIMEOUT_MS) as finished:
        engine.generate(
            Generate("lesson", SamplingSettings(max_tokens=4), prompt="The bytes of a cache")
        )
    n_past = finished.args[0].n_past
    qtbot.waitUntil(lambda: dashboard.lesson.lesson.tokens == n_past, timeout=HANG_GUARD_MS)
    now = dashboard.lesson.lesson
    assert 0 < now.read_per_step < now.fp16_read_per_step
    assert f"Now {n_past:,} tokens are in the context" in dashboard.lesson.text.text()
    assert dashboard.lesson.chart.isVisible() and len(dashboard.lesson.chart.bars) == 4


def test_the_sentences_say_each_size_as_the_chart_does(starter_model_path) -> None:
    """At 16,384 tokens the score matrix passes 1 GiB: the text and the bar say it alike."""
    header = read_gguf_header(starter_model_path)
    lesson = lesson_for(header, kv_cache_bytes(header, 16384, DEFAULT_KV_MODE), tokens=600)
    text = " ".join(lesson_sentences(lesson))
    for _label, n_bytes, _colour in lesson_bars(lesson):
        if n_bytes != lesson.tile_bytes:  # the tile is named by its side in the text
            assert units.size(n_bytes, 1) in text, (n_bytes, text)
    assert lesson.score_matrix_bytes >= 2**30 and "MiB if written out whole" not in text
