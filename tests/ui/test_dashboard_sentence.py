"""The Dashboard opens with one plain sentence about the loaded model's KV cache, from the
real load of the starter model; each of its numbers is checked against what the KV panel
shows and against llama.cpp's own allocation, and the probe's caveats wait behind Details
(issue 12, point 7a)."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("pytestqt")

from app.kv.kv_summary import kv_mib  # noqa: E402
from app.kv.kv_types import KvMode
from app.load.profile import LoadProfile
from tests.engine_threads import ENGINE_THREADS
from tests.ui.conftest import LOAD_TIMEOUT_MS  # noqa: E402

pytestmark = pytest.mark.slow

ALLOCATED = re.compile(
    r"Allocated for ([\d,]+) tokens: <b>([\d.,]+ MiB)</b> with (\S+) \(llama.cpp's log\) "
    r"vs ([\d.,]+ MiB) at f16/f16 \(computed\) - <b[^>]*>([\d.,]+ MiB) "
)
SENTENCE = re.compile(
    r"KV cache at ([\d,]+) tokens: ([\d.,]+ MiB) in f16, ([\d.,]+ MiB) with int8-K \((\S+)\): "
    r"([\d.,]+ MiB) saved, room for ([\d,]+) more tokens in the same memory\."
)


def _load(qtbot, engine, options: LoadProfile):
    with qtbot.waitSignal(engine.model_loaded, timeout=LOAD_TIMEOUT_MS) as loaded:
        engine.load(options)
    return loaded.args[0]


def test_the_sentence_gives_the_kv_figures_llama_cpp_confirms(qtbot, loaded_chat_app) -> None:
    from app.ui.dashboard.page import DashboardPage

    window, engine = loaded_chat_app.window, loaded_chat_app.engine
    window.show_page("Dashboard")
    page = window.findChild(DashboardPage)
    sentence = page.header.sentence
    assert sentence.isVisible() and page.header.title.isVisible()

    said = SENTENCE.fullmatch(sentence.text())
    assert said, sentence.text()
    n_ctx, fp16, mine, mode, saved, more = said.groups()
    shown = ALLOCATED.search(page.kv_panel.alloc_label.text())
    assert shown, page.kv_panel.alloc_label.text()
    # The same figures as the KV panel's line (llama.cpp's log and the KV arithmetic).
    assert (n_ctx, mine, mode, fp16, saved) == shown.groups()
    assert (n_ctx, mode) == ("2,048", "q8_0/f16")
    loaded = engine.loaded
    assert mine == kv_mib(sum(c.total_bytes for c in loaded.kv_caches))

    path, more_tokens = loaded.model_path, int(more.replace(",", ""))
    assert more_tokens > 0 and more_tokens % 256 == 0
    # f16/f16 at the same context: llama.cpp allocates what the sentence says f16 takes.
    as_fp16 = _load(
        qtbot,
        engine,
        LoadProfile(path, n_ctx=2048, n_threads=ENGINE_THREADS, kv=KvMode.parse("f16/f16")),
    )
    fp16_bytes = sum(c.total_bytes for c in as_fp16.kv_caches)
    assert kv_mib(fp16_bytes) == fp16
    assert sentence.text().startswith(f"KV cache at 2,048 tokens: {fp16} in f16/f16, no saving")
    # "Room for N more tokens": llama.cpp fits 2,048 + N tokens of q8_0/f16 into the f16/f16
    # cache's bytes, and not 256 more.
    for extra, fits in ((more_tokens, True), (more_tokens + 256, False)):
        bigger = _load(
            qtbot, engine, LoadProfile(path, n_ctx=2048 + extra, n_threads=ENGINE_THREADS)
        )
        assert (sum(c.total_bytes for c in bigger.kv_caches) <= fp16_bytes) is fits, extra

    # How memory is measured, and what the probe cannot see, waits behind Details.
    details = page.header.details
    assert not details.isVisible() and "psutil" not in sentence.text()
    page.header.details_button.click()
    assert details.isVisible()
    assert "sampled 10 times a second by <b>psutil</b>" in details.text()
    assert "Counts system RAM" in details.text()
    page.header.details_button.click()
    assert not details.isVisible()

    # Unloaded: the sentence says what to do.
    with qtbot.waitSignal(engine.model_unloaded, timeout=LOAD_TIMEOUT_MS):
        engine.unload()
    assert sentence.text().startswith("No model loaded. Load one on the Chat page")
