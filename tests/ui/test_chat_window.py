"""The chat window with the real engine and the real starter model (a base model, so
the tests check that text streams in, not what it says)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.chats.records import CUT, DONE, STOPPED, STREAMING
from app.ui.chat import session as chat_session
from tests.ui.conftest import LOAD_TIMEOUT_MS, REPLY_TIMEOUT_MS
from tests.waits import HANG_GUARD_MS

pytestmark = pytest.mark.slow


def _new_chat(page, max_tokens: int = 12) -> None:
    page.session.new_conversation()
    page.session.set_conversation_settings("", {"max_tokens": max_tokens, "temperature": 0.0})


def _reply(qtbot, app, text: str):
    """Send `text` through the input box (Enter) and wait for the reply to finish."""
    page = app.window.chat
    with qtbot.waitSignal(app.engine.reply_finished, timeout=REPLY_TIMEOUT_MS) as blocker:
        qtbot.keyClicks(page.input, text)
        qtbot.keyClick(page.input, Qt.Key.Key_Return)
    return blocker.args[0]


def _resend_edit(qtbot, app, text: str) -> None:
    """Type `text` over the message being edited, Enter, and wait for the reply to finish."""
    box = app.window.chat.view.editor.text_box
    box.clear()
    with qtbot.waitSignal(app.engine.reply_finished, timeout=REPLY_TIMEOUT_MS):
        qtbot.keyClicks(box, text)
        qtbot.keyClick(box, Qt.Key.Key_Return)


# At least 7 tokens whatever the model would write (each digit is a token of the starter's
# vocabulary and the reply cannot end before the 4th comma): a GBNF grammar in the chat's
# sampling, as an API request's response_format makes one.
SEVEN_TOKENS_OR_MORE = 'root ::= [0-9]+ ("," [0-9]+){3,}'


def test_send_shows_streamed_reply(qtbot, loaded_chat_app) -> None:
    """Enter sends the message and the reply streams in: it grows on screen in several steps
    while it is written, and the finished reply is stored as shown, with the status bar's
    speed."""
    app = loaded_chat_app
    page = app.window.chat
    page.session.new_conversation()
    page.session.set_conversation_settings(
        "", {"max_tokens": 16, "temperature": 0.0, "grammar": SEVEN_TOKENS_OR_MORE}
    )
    tokens: list[str] = []
    streaming: list[str] = []  # the reply on screen each time its row changed while written
    app.engine.token_received.connect(lambda token: tokens.append(token.text))

    def on_row_changed(top, _bottom, _roles=()) -> None:
        message = page.session.model.messages()[top.row()]
        if message.role == "assistant" and message.status == STREAMING:
            streaming.append(message.content)

    page.session.model.dataChanged.connect(on_row_changed)
    finished = _reply(qtbot, app, "Count from 1 to 20.")
    messages = page.session.model.messages()
    assert [m.role for m in messages] == ["user", "assistant"]
    assert page.input.toPlainText() == ""
    reply = messages[-1]
    assert reply.status == (CUT if finished.stop_reason == "length" else DONE)
    assert len(tokens) >= 7 and finished.generated_tokens >= 7
    # It grew on screen while it was written, each step the beginning of the reply.
    shown = [text for text in streaming if text]
    assert len(set(shown)) >= 2 and all(reply.content.startswith(text) for text in shown)
    stored = app.store.messages(page.session.conversation.id)[-1]
    assert stored.content == reply.content and stored.generated_tokens == finished.generated_tokens
    assert page.status.speed_label.text().endswith("tok/s")


def test_settings_set_before_the_first_message_shape_its_reply(qtbot, loaded_chat_app) -> None:
    """A user who sets the panel before any chat exists gets those settings for the chat their
    first message starts (they were dropped: the first reply ran to the default 256 tokens)."""
    app = loaded_chat_app
    page = app.window.chat
    assert page.session.conversation is None
    panel = page.settings_panel
    panel.max_tokens.setValue(3)
    panel.temperature.setValue(0.0)
    qtbot.keyClicks(panel.system_prompt, "Answer in one word.")
    finished = _reply(qtbot, app, "Name a colour")
    assert 0 < finished.generated_tokens <= 3  # fewer only if the model ends its reply sooner
    conversation = page.session.conversation
    assert conversation is not None
    assert conversation.system_prompt == "Answer in one word."
    assert conversation.sampling["max_tokens"] == 3
    assert panel.max_tokens.value() == 3  # the panel still shows what the chat has


def test_stop_during_reply(qtbot, loaded_chat_app, monkeypatch) -> None:
    app = loaded_chat_app
    page = app.window.chat
    # Each token saved as it comes (the 0.5 s cadence is tests/core/test_chat_store.py's), so the
    # save mid-reply is an event this test waits for, not a race with how fast the model writes.
    monkeypatch.setattr(chat_session, "SAVE_INTERVAL_S", 0.0)
    _new_chat(page, max_tokens=400)

    def saved_mid_reply(*_token: object) -> bool:
        # The session heard the token first (it connected first) and has saved it.
        return app.store.message(page.session.model.messages()[-1].id).content != ""

    qtbot.keyClicks(page.input, "Once upon a time")
    with qtbot.waitSignal(
        app.engine.token_received, timeout=REPLY_TIMEOUT_MS, check_params_cb=saved_mid_reply
    ):
        qtbot.keyClick(page.input, Qt.Key.Key_Return)
    assert page.send_button.text() == "Stop"
    reply_id = page.session.model.messages()[-1].id
    assert app.store.message(reply_id).status == STREAMING
    with qtbot.waitSignal(app.engine.reply_finished, timeout=HANG_GUARD_MS) as blocker:
        page.send_button.click()
    assert blocker.args[0].stop_reason == "cancelled"
    reply = page.session.model.messages()[-1]
    assert reply.status == STOPPED and reply.content
    assert reply.generated_tokens < 400
    assert page.send_button.text() == "Send"


def test_regenerate_adds_a_version_of_the_last_reply(qtbot, loaded_chat_app) -> None:
    app = loaded_chat_app
    page = app.window.chat
    _new_chat(page)
    _reply(qtbot, app, "My favourite fruit is")
    first = page.session.model.messages()[-1]
    page.session.set_conversation_settings("", {"max_tokens": 12, "temperature": 1.0, "seed": 7})
    with qtbot.waitSignal(app.engine.reply_finished, timeout=REPLY_TIMEOUT_MS):
        page.regenerate_button.click()
    messages = page.session.model.messages()
    assert [m.role for m in messages] == ["user", "assistant"]
    # The reply's row now shows version 2 of 2; version 1 is kept, not deleted.
    assert messages[-1].id == first.id and messages[-1].content
    assert (messages[-1].version, messages[-1].versions) == (2, 2)
    assert app.store.reply_versions(first.id)[0].content == first.content
    assert [m.id for m in app.store.messages(page.session.conversation.id)] == [
        m.id for m in messages
    ]


def test_edit_and_resend_truncates_later_messages(qtbot, loaded_chat_app) -> None:
    app = loaded_chat_app
    page = app.window.chat
    _new_chat(page, max_tokens=8)
    _reply(qtbot, app, "Question one:")
    _reply(qtbot, app, "Question two:")
    first_user = page.session.model.messages()[0]
    page.start_edit(first_user.id)  # in place: the message's bubble holds its editor
    assert page.view.editor.text_box.toPlainText() == "Question one:"
    _resend_edit(qtbot, app, "An edited question:")
    messages = page.session.model.messages()
    assert [(m.role, m.content if m.role == "user" else "") for m in messages] == [
        ("user", "An edited question:"),
        ("assistant", ""),
    ]
    assert len(app.store.messages(page.session.conversation.id)) == 2
    assert page.view.editor is None


def test_context_meter_moves_after_reply(qtbot, loaded_chat_app) -> None:
    app = loaded_chat_app
    page = app.window.chat
    _new_chat(page)
    assert page.status.context_meter.value() == 0
    finished = _reply(qtbot, app, "Hello there")
    meter = page.status.context_meter
    assert meter.maximum() == app.engine.loaded.n_ctx == 2048
    assert meter.value() == finished.n_past > 0
    assert "/ 2,048" in meter.format()
    assert (
        "q8_0" in page.status.kv_label.text() and "Flash Attention" in page.status.kv_label.text()
    )


def test_conversation_persists_across_restart(qtbot, chat_data_dir: Path, loaded_chat_app) -> None:
    from app.gui import build_app
    from app.platform.paths import data_dir

    app = loaded_chat_app
    page = app.window.chat
    _new_chat(page)
    _reply(qtbot, app, "Remember this line")
    before = [(m.role, m.content) for m in page.session.model.messages()]
    title = page.session.conversation.title
    app.window.close()
    app.close()
    again = build_app(data_dir())
    try:
        again.window.show()
        chat = again.window.chat
        assert [(m.role, m.content) for m in chat.session.model.messages()] == before
        assert chat.conversations.titles()[0] == title == "Remember this line"
        assert again.settings.settings.last_model == "starter"
    finally:
        again.window.close()
        again.close()


def test_load_failure_shows_message_and_window_survives(qtbot, tmp_path: Path, chat_app) -> None:
    page = chat_app.window.chat
    fake = tmp_path / "notes.gguf"
    fake.write_text("this is a text file, not a model\n" * 50)
    with qtbot.waitSignal(page.model_resolve_failed, timeout=HANG_GUARD_MS) as blocker:
        page.load_model(str(fake))
    assert "GGUF" in blocker.args[0]
    box = chat_app.window.last_error_box
    assert box is not None and box.isVisible() and "GGUF" in box.text()
    box.accept()
    assert chat_app.window.isVisible()
    assert page.status.model_label.text() == "No model loaded"
    assert page.offer.isVisible()  # still offers the starter model


def test_engine_crash_is_reported_and_next_message_restarts_it(qtbot, loaded_chat_app) -> None:
    app = loaded_chat_app
    page = app.window.chat
    _new_chat(page, max_tokens=6)
    _reply(qtbot, app, "First")
    pid = app.engine.engine_pid
    with qtbot.waitSignal(app.engine.engine_crashed, timeout=HANG_GUARD_MS) as blocker:
        os.kill(pid, signal.SIGKILL)
    assert "SIGKILL" in blocker.args[0]
    qtbot.waitUntil(lambda: app.window.last_error_box is not None, timeout=HANG_GUARD_MS)
    app.window.last_error_box.accept()
    assert len(page.session.model.messages()) == 2  # nothing lost
    with (
        qtbot.waitSignal(app.engine.model_loaded, timeout=LOAD_TIMEOUT_MS),
        qtbot.waitSignal(app.engine.reply_finished, timeout=REPLY_TIMEOUT_MS, raising=False),
    ):
        qtbot.keyClicks(page.input, "Second")
        qtbot.keyClick(page.input, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not page.session.generating, timeout=REPLY_TIMEOUT_MS)
    assert app.engine.engine_pid not in (None, pid)
    messages = page.session.model.messages()
    assert len(messages) == 4 and messages[-1].status == DONE and messages[-1].content


def test_open_app_with_starter_opens_with_it_loaded(qtbot, chat_data_dir: Path) -> None:
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.gui import open_app
    from app.ui.main_window import MainWindow

    seen: dict[str, object] = {}
    deadline = QTimer()
    deadline.setSingleShot(True)
    deadline.timeout.connect(QApplication.quit)  # never hang the suite
    deadline.start(LOAD_TIMEOUT_MS)

    def poll() -> None:
        windows = [
            w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow) and w.isVisible()
        ]
        if windows and windows[0].engine_client.loaded is not None:
            window = windows[0]
            seen["model"] = window.engine_client.loaded.model_path
            seen["status"] = window.chat.status.model_label.text()
            seen["offer"] = window.chat.offer.isVisible()
            window.close()  # the last window: open_app returns
            return
        QTimer.singleShot(100, poll)

    QTimer.singleShot(0, poll)
    assert open_app("starter") == 0
    deadline.stop()
    assert str(seen.get("model", "")).endswith(".gguf")
    assert str(seen["status"]).startswith("gemma-3-270m") and seen["offer"] is False


def test_deleting_a_chat_while_it_streams(qtbot, loaded_chat_app, monkeypatch) -> None:
    from PySide6.QtWidgets import QMessageBox

    app = loaded_chat_app
    page = app.window.chat
    _new_chat(page, max_tokens=400)
    with qtbot.waitSignal(app.engine.token_received, timeout=REPLY_TIMEOUT_MS):
        page.send("It was a dark and stormy night")
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    with qtbot.waitSignal(app.engine.reply_finished, timeout=HANG_GUARD_MS):
        page.conversations.ask_delete(page.session.conversation.id)
    qtbot.waitUntil(lambda: not page.session.generating, timeout=HANG_GUARD_MS)
    assert app.store.conversations() == [] and page.session.model.rowCount() == 0
    assert page.send_button.text() == "Send"


def test_engine_load_failure_shows_message_and_keeps_the_model_picker(
    qtbot, tmp_path: Path, chat_app
) -> None:
    from app.load.profile import LoadProfile

    page = chat_app.window.chat
    bad = tmp_path / "renamed.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 64)  # passes no real check: the engine must refuse it
    with qtbot.waitSignal(chat_app.engine.load_failed, timeout=LOAD_TIMEOUT_MS) as blocker:
        chat_app.engine.load(LoadProfile(str(bad), n_ctx=2048))
    assert blocker.args[0]
    qtbot.waitUntil(lambda: chat_app.window.last_error_box is not None, timeout=HANG_GUARD_MS)
    box = chat_app.window.last_error_box
    assert box.isVisible() and box.text().startswith("Could not load the model")
    box.accept()
    assert chat_app.window.isVisible() and chat_app.engine.loaded is None
    assert not page.status.busy_bar.isVisible()
    assert page.picker.text().startswith("Select a model")
    assert page.offer.isVisible()


def test_a_reply_that_leaves_out_old_messages_says_so_in_the_chat_not_the_dashboard(
    qtbot, chat_app
) -> None:
    from app.ui.dashboard.page import DashboardPage

    app = chat_app
    page = app.window.chat
    app.settings.update(n_ctx=512)
    with qtbot.waitSignal(app.engine.model_loaded, timeout=LOAD_TIMEOUT_MS):
        page.offer_button.click()
    pages = [app.window.pages.widget(i) for i in range(app.window.pages.count())]
    dashboard = next(p for p in pages if isinstance(p, DashboardPage))
    _new_chat(page, max_tokens=4)
    conversation = page.session.conversation
    long_turn = " ".join(f"word{i}" for i in range(60))
    for i in range(4):
        app.store.add_message(conversation.id, "user", f"{i}: {long_turn}")
        app.store.add_message(conversation.id, "assistant", "Noted.")
    page.open_conversation(conversation.id)
    assert not page.status.trimmed_label.isVisible()
    _reply(qtbot, app, "Say hi.")
    notice = page.status.trimmed_label
    assert notice.isVisible() and "oldest messages left out" in notice.text()
    assert "longer than the 512-token context" in notice.toolTip()
    # A notice about this conversation: no kernel warning in the chat or on the dashboard.
    assert not page.status.warning_label.isVisible() and app.engine.kernel_warnings == ()
    assert dashboard.banner.isHidden() and dashboard.warnings == ()
    # It was about that conversation's reply: another conversation does not show it.
    page.session.new_conversation()
    assert not notice.isVisible()
    page.open_conversation(conversation.id)
    _reply(qtbot, app, "Say hi again.")
    assert notice.isVisible()
    # Edited down to one short message, the next reply fits: the notice goes.
    first = page.session.model.messages()[0]
    page.start_edit(first.id)
    _resend_edit(qtbot, app, "Hello")
    assert len(page.session.model.messages()) == 2 and not notice.isVisible()
