"""Errors where they happen (issue 12, point 3), in the real app offscreen with the real engine:
a failed reply says why in the conversation, also after a restart; a model llama.cpp refuses
says why and leaves the loaded model loaded (kept, or loaded again); after the engine is
killed the page says what happened and what happens next, with the engine's last lines only
behind the error box's Details."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.chats.records import CUT, DONE, FAILED
from tests.gguf_factory import write_unknown_arch_gguf, write_vocab_only_gguf
from tests.ui.conftest import LOAD_TIMEOUT_MS, REPLY_TIMEOUT_MS
from tests.waits import HANG_GUARD_MS

pytestmark = pytest.mark.slow

NO_MODEL = "No model is loaded: load a model first."


def _type(qtbot, page, text: str) -> None:
    qtbot.keyClicks(page.input, text)
    qtbot.keyClick(page.input, Qt.Key.Key_Return)


def _ended(finished) -> str:
    """The status a finished reply shows: 'cut' at its max_tokens (with Continue), else done."""
    return CUT if finished.stop_reason == "length" else DONE


def _shown_text(page, row: int) -> str:
    """The text the conversation draws for a row (the delegate's rendered document)."""
    model = page.session.model
    index = model.index(row)
    message = model.messages()[row]
    from app.ui.chat.message_model import VersionRole

    width = page.view.viewport().width()
    return page.view.delegate._document(message, index.data(VersionRole), width).toPlainText()


def _error_box(qtbot, app):
    qtbot.waitUntil(lambda: app.window.last_error_box is not None, timeout=HANG_GUARD_MS)
    box = app.window.last_error_box
    app.window.last_error_box = None
    return box


def test_a_failed_reply_says_why_in_the_conversation_and_after_a_restart(
    qtbot, chat_data_dir: Path, chat_app, tmp_path: Path
) -> None:
    from app.gui import build_app
    from app.platform.paths import data_dir

    page = chat_app.window.chat
    # The page no longer sends without a model (Send is disabled and says why), so the reply
    # that fails is asked of the chat's session, which the page sends through: the engine
    # refuses it, as it refuses any reply while no model is loaded.
    with qtbot.waitSignal(page.session.reply_failed, timeout=HANG_GUARD_MS):
        assert page.session.send("Hello?")
    reply = page.session.model.messages()[-1]
    assert (reply.role, reply.status, reply.error) == ("assistant", FAILED, NO_MODEL)
    assert _shown_text(page, 1) == f"⚠ The reply failed: {NO_MODEL}"
    page.view.grab().save(str(tmp_path / "failed_reply.png"))

    chat_app.window.close()
    chat_app.close()
    again = build_app(data_dir())
    try:
        again.window.show()
        chat = again.window.chat
        assert [m.role for m in chat.session.model.messages()] == ["user", "assistant"]
        assert _shown_text(chat, 1) == f"⚠ The reply failed: {NO_MODEL}"
    finally:
        again.window.close()
        again.close()


def test_a_model_llama_cpp_refuses_leaves_the_loaded_one_loaded(
    qtbot, tmp_path: Path, loaded_chat_app
) -> None:
    app = loaded_chat_app
    page = app.window.chat
    starter = app.engine.loaded.model_path
    loads: list[object] = []
    app.engine.loading_started.connect(loads.append)

    # Refused before anything is dropped: the loaded model is kept.
    strange = write_unknown_arch_gguf(tmp_path / "strange.gguf")
    with (
        qtbot.waitSignal(app.engine.load_failed, timeout=LOAD_TIMEOUT_MS) as failed,
        qtbot.waitSignal(app.engine.model_loaded, timeout=LOAD_TIMEOUT_MS),
    ):
        page.load_model(str(strange))
    assert failed.args[0] == (
        "llama.cpp could not load strange.gguf: unknown model architecture: 'strangearch'. "
        "The model before it, gemma-3-270m-q4_k_m.gguf, is still loaded."
    )
    box = _error_box(qtbot, app)
    assert box.text() == f"Could not load the model: {failed.args[0]}"
    box.accept()
    assert app.engine.loaded.model_path == starter
    assert page.status.model_label.text() == "gemma-3-270m-q4_k_m"
    assert "gemma-3-270m-q4_k_m" in page.picker.text()

    # Refused once its tensors are read: the model before it is loaded again.
    no_tensors = write_vocab_only_gguf(tmp_path / "no-tensors.gguf")
    with (
        qtbot.waitSignal(app.engine.load_failed, timeout=LOAD_TIMEOUT_MS) as failed,
        qtbot.waitSignal(app.engine.model_loaded, timeout=LOAD_TIMEOUT_MS),
    ):
        page.load_model(str(no_tensors))
    assert failed.args[0].startswith("llama.cpp could not load no-tensors.gguf: ")
    assert failed.args[0].endswith(
        "The model before it, gemma-3-270m-q4_k_m.gguf, was loaded again."
    )
    _error_box(qtbot, app).accept()
    assert app.engine.loaded.model_path == starter

    # The user keeps chatting with it, doing nothing else: no load happens for the reply.
    loads.clear()
    page.session.set_conversation_settings("", {"max_tokens": 4, "temperature": 0.0})
    with qtbot.waitSignal(app.engine.reply_finished, timeout=REPLY_TIMEOUT_MS) as finished:
        _type(qtbot, page, "Hello")
    assert page.session.model.messages()[-1].status == _ended(finished.args[0])
    assert loads == []


def test_after_the_engine_is_killed_the_page_says_what_happens_next(
    qtbot, loaded_chat_app, tmp_path: Path
) -> None:
    app = loaded_chat_app
    page = app.window.chat
    said = (
        "The engine stopped (killed by signal 9, SIGKILL). Your conversation is saved; "
        "the model reloads when you send a message."
    )
    with qtbot.waitSignal(app.engine.engine_crashed, timeout=REPLY_TIMEOUT_MS):
        os.kill(app.engine.engine_pid, signal.SIGKILL)
    box = _error_box(qtbot, app)
    assert box.text() == said  # the engine's last lines are behind Details only
    assert "Last lines of its output:" not in box.text()
    assert box.detailedText() == "" or "Last lines of its output:" in box.detailedText()
    box.accept()
    assert page.stopped.isVisible() and page.stopped.text.text() == said
    assert page.status.model_label.text() == "Engine stopped: reloads when you send"
    assert "gemma-3-270m-q4_k_m" in page.picker.text()  # the model that comes back
    app.window.grab().save(str(tmp_path / "engine_stopped.png"))

    page.session.set_conversation_settings("", {"max_tokens": 4, "temperature": 0.0})
    with (
        qtbot.waitSignal(app.engine.model_loaded, timeout=LOAD_TIMEOUT_MS),
        qtbot.waitSignal(app.engine.reply_finished, timeout=REPLY_TIMEOUT_MS) as finished,
    ):
        _type(qtbot, page, "Still there?")
    assert page.session.model.messages()[-1].status == _ended(finished.args[0])
    assert not page.stopped.isVisible()
    assert page.status.model_label.text() == "gemma-3-270m-q4_k_m"
