"""The engine killed with SIGKILL while it loads, while it reads the prompt and while it
streams a reply (the real app offscreen, the real engine): the window stays up and says what
happened in plain words, the conversation keeps the partial reply, and the next message starts
a fresh engine. An engine that dies three times in a row on one model is not restarted for it
again. Every kill is fired from the event that marks the phase, never from a timer."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import pytest
from PySide6.QtCore import Qt, SignalInstance

from app.chats.records import CUT, DONE, INTERRUPTED
from app.services.crash_streak import CRASHES_BEFORE_GIVING_UP
from app.ui.chat.chat_page import NO_MODEL_TO_SEND
from tests.ui.conftest import LOAD_TIMEOUT_MS, REPLY_TIMEOUT_MS
from tests.waits import HANG_GUARD_MS

pytestmark = pytest.mark.slow

AREA = "Kills and crashes"
KILLED = "The engine stopped (killed by signal 9, SIGKILL)."
RELOADS = f"{KILLED} Your conversation is saved; the model reloads when you send a message."
# ~1,300 prompt tokens: the starter model reads them for seconds on 2 cores, so a kill on
# prompt_started lands before the first token (the test checks that none arrived).
LONG_PROMPT = "Summarise this list: " + ", ".join(f"item {i}" for i in range(220))


def kill_engine_on(
    app, signal_: SignalInstance, when: Callable[..., object] = lambda *_args: True
) -> list[int]:
    """SIGKILL the engine the first time `signal_` fires with arguments `when` accepts;
    returns the killed pids."""
    killed: list[int] = []

    def kill(*args: object) -> None:
        pid = app.engine.engine_pid
        if not killed and pid is not None and when(*args):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            signal_.disconnect(kill)

    signal_.connect(kill)
    return killed


def _type(qtbot, page, text: str) -> None:
    qtbot.keyClicks(page.input, text)
    qtbot.keyClick(page.input, Qt.Key.Key_Return)


def _crash_box_text(qtbot, app) -> str:
    qtbot.waitUntil(lambda: app.window.last_error_box is not None, timeout=HANG_GUARD_MS)
    box = app.window.last_error_box
    text = box.text()
    box.accept()
    app.window.last_error_box = None
    return text


def _send_and_finish(qtbot, app, text: str) -> None:
    """The next message after a crash: a fresh engine reloads the model and replies."""
    page = app.window.chat
    page.session.set_conversation_settings("", {"max_tokens": 4, "temperature": 0.0})
    with (
        qtbot.waitSignal(app.engine.model_loaded, timeout=LOAD_TIMEOUT_MS),
        qtbot.waitSignal(app.engine.reply_finished, timeout=REPLY_TIMEOUT_MS) as finished,
    ):
        _type(qtbot, page, text)
    ended = CUT if finished.args[0].stop_reason == "length" else DONE  # CUT: at max_tokens
    assert page.session.model.messages()[-1].status == ended


def _after_crash(qtbot, app, killed: list[int], crashed: Callable[[], None]) -> str:
    with qtbot.waitSignal(app.engine.engine_crashed, timeout=REPLY_TIMEOUT_MS):
        crashed()
    assert len(killed) == 1
    assert app.window.isVisible()
    return _crash_box_text(qtbot, app)


def test_engine_killed_while_loading_reading_and_replying(
    qtbot, loaded_chat_app, reliability
) -> None:
    app = loaded_chat_app
    page = app.window.chat
    page.session.new_conversation()
    page.session.set_conversation_settings("", {"max_tokens": 300, "temperature": 0.0})
    pids = {app.engine.engine_pid}

    # 1. While the reply streams: killed on its first token with words to show (a framed
    # reply's first token can be the space after "Assistant:", which shows nothing).
    received: list[str] = []
    app.engine.token_received.connect(lambda token: received.append(token.text))
    killed = kill_engine_on(app, app.engine.token_received, lambda token: token.text.strip())
    text = _after_crash(qtbot, app, killed, lambda: _type(qtbot, page, "Count to fifty: 1, 2,"))
    assert text == RELOADS
    user, reply = page.session.model.messages()
    assert user.content == "Count to fifty: 1, 2,"
    # What streamed is kept, as the chat shows it (without the frame's space before it).
    assert reply.status == INTERRUPTED and reply.content == "".join(received).lstrip() != ""
    stored = app.store.message(reply.id)
    assert (stored.status, stored.content) == (INTERRUPTED, reply.content)  # on disk too
    assert page.status.model_label.text().startswith("Engine stopped")
    _send_and_finish(qtbot, app, "Go on")
    assert app.engine.engine_pid not in pids
    pids.add(app.engine.engine_pid)

    # 2. While it reads the prompt: killed on prompt_started, before any token.
    received.clear()
    killed = kill_engine_on(app, app.engine.prompt_started)
    text = _after_crash(qtbot, app, killed, lambda: _type(qtbot, page, LONG_PROMPT))
    assert text == RELOADS
    reply = page.session.model.messages()[-1]
    assert received == [] and reply.status == INTERRUPTED and reply.content == ""
    assert page.session.model.messages()[-2].content == LONG_PROMPT
    # The next message in a new conversation: in this one the fresh engine would read the
    # long prompt again (seconds of CPU, twice), and what is tested here is the restart.
    page.session.new_conversation()
    _send_and_finish(qtbot, app, "Short one")
    assert app.engine.engine_pid not in pids
    pids.add(app.engine.engine_pid)

    # 3. While the model loads: killed on loading_started.
    killed = kill_engine_on(app, app.engine.loading_started)
    model_path = app.engine.loaded.model_path
    text = _after_crash(qtbot, app, killed, lambda: page.load_model(model_path))
    assert text == RELOADS  # one box: the load's failure is not said a second time
    before = [(m.role, m.content, m.status) for m in page.session.model.messages()]
    _send_and_finish(qtbot, app, "Still there?")
    assert app.engine.engine_pid not in pids
    after = [(m.role, m.content, m.status) for m in page.session.model.messages()]
    assert after[: len(before)] == before and len(after) == len(before) + 2

    reliability.record(AREA, "engine SIGKILLs in the GUI: load / prompt / reply", "1 / 1 / 1")
    reliability.record(
        AREA,
        "after each engine kill",
        "window up, one plain sentence, partial reply kept as 'interrupted', "
        "next message started a fresh engine",
    )


def test_three_crashes_in_a_row_stop_the_reloading(qtbot, chat_app, tiny_gguf, reliability):
    app = chat_app
    page = app.window.chat
    model = tiny_gguf("crashes.gguf")
    starts: list[object] = []
    app.engine.loading_started.connect(starts.append)
    texts = []
    for attempt in range(CRASHES_BEFORE_GIVING_UP):
        killed = kill_engine_on(app, app.engine.loading_started)
        if attempt == 0:
            texts.append(_after_crash(qtbot, app, killed, lambda: page.load_model(str(model))))
        else:
            texts.append(_after_crash(qtbot, app, killed, lambda: _type(qtbot, page, "Hello")))
    assert texts[:2] == [RELOADS, RELOADS]
    assert texts[2] == (
        f"{KILLED} It stopped 3 times in a row with crashes.gguf, so that model is not loaded "
        "again by itself; choose it in the model picker to try again. Your conversation is saved."
    )
    assert page.status.model_label.text() == "Engine stopped (3 crashes in a row)"
    # Nothing reloads by itself now: Send is disabled and says why, and a message typed and
    # entered stays in the input (nothing sent, no engine started) while the window says why.
    assert not page.send_button.isEnabled() and page.send_button.toolTip() == NO_MODEL_TO_SEND
    with qtbot.waitSignal(app.bridge.info_reported, timeout=HANG_GUARD_MS) as said:
        _type(qtbot, page, "And now?")
    assert said.args[0] == NO_MODEL_TO_SEND
    assert app.window.statusBar().currentMessage() == NO_MODEL_TO_SEND
    assert page.input.toPlainText() == "And now?"
    assert len(starts) == 3 and app.engine.engine_pid is None  # no fourth engine
    users = [m.content for m in page.session.model.messages() if m.role == "user"]
    assert users == ["Hello", "Hello"]  # every message sent is kept
    # Choosing the model again gives it its tries back.
    with qtbot.waitSignal(app.engine.model_loaded, timeout=LOAD_TIMEOUT_MS):
        page.load_model(str(model))
    reliability.record(AREA, "crashes in a row on one model before reloading stops", 3)
