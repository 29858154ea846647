"""Loading a model that does not fit the free memory: the chat page says so in one sentence
with the numbers before any engine starts, and offers "Load anyway"."""

from __future__ import annotations

import re

import pytest
from PySide6.QtWidgets import QMessageBox

from app.kv.fit import memory_need
from app.load.load_check import free_memory_for
from app.models.gguf_read import read_gguf_header
from app.platform.probes import FREE_MEMORY_ENV
from tests.ui.conftest import LOAD_TIMEOUT_MS
from tests.waits import HANG_GUARD_MS

N_CTX = 2048  # tests/ui/conftest.py's chat_data_dir saves this context


@pytest.fixture
def small_device(monkeypatch, starter_model_path) -> None:
    """Free memory one byte short of what the starter model needs at N_CTX (this machine
    has far more, so the figure is capped through KVSTUDIO_FREE_MEMORY)."""
    header = read_gguf_header(starter_model_path)
    on_gpu = free_memory_for(-1, header.block_count).on_gpu
    need = memory_need(
        header, N_CTX, "q8_0/f16", file_size=starter_model_path.stat().st_size, on_gpu=on_gpu
    )
    monkeypatch.setenv(FREE_MEMORY_ENV, str(need.total_bytes - 1))


def refusal(qtbot, page) -> QMessageBox:
    page.load_model("starter")
    qtbot.waitUntil(
        lambda: page.load_refusal is not None and page.load_refusal.isVisible(),
        timeout=HANG_GUARD_MS,
    )
    return page.load_refusal


def button(box: QMessageBox, text: str):
    return next(b for b in box.buttons() if b.text().replace("&", "") == text)


def test_a_load_that_does_not_fit_is_refused_before_the_engine_starts(
    qtbot, chat_app, small_device
) -> None:
    page = chat_app.window.chat
    started = []
    chat_app.engine.loading_started.connect(started.append)
    box = refusal(qtbot, page)
    text = box.text()
    assert f"for the KV cache at {N_CTX:,} tokens" in text
    # The starter needs under 1 GiB, so the figures are in MiB (never "0.8 GiB ... 0.8 GiB").
    assert re.search(r"has \d[\d,]*\.\d+ MiB free \(1,792 tokens would fit\)", text), text
    assert text.endswith("lower the context length in Load options, or choose Load anyway.")
    assert started == [] and chat_app.engine.last_options is None  # nothing was sent
    button(box, "Cancel").click()
    qtbot.waitUntil(lambda: page.load_refusal is None, timeout=HANG_GUARD_MS)
    assert started == [] and chat_app.engine.loaded is None
    assert page.picker.text().startswith("Select a model") and page.offer.isVisible()


@pytest.mark.slow
def test_load_anyway_loads_it(qtbot, chat_app, small_device) -> None:
    page = chat_app.window.chat
    box = refusal(qtbot, page)
    with qtbot.waitSignal(chat_app.engine.model_loaded, timeout=LOAD_TIMEOUT_MS) as blocker:
        button(box, "Load anyway").click()
    assert blocker.args[0].n_ctx == N_CTX and page.load_refusal is None
    assert not page.offer.isVisible()
