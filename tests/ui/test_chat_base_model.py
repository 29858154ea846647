"""The first chat with the starter (Gemma 3 270M, a base model) makes sense, in the real app
with the real engine: "Chat anyway" opens a chat whose replies come from a question-and-answer
frame and end by themselves (not at the token limit), with no frame markers and no echo of the
question; the note saying what a base model is stays above the input with the one-click
download of a small instruct model; a reply cut at its token limit says so and Continue makes
that same reply go on. One engine for the module: the tests only chat with it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtCore import QRect, Qt

from app.chats.base_model_frame import ASSISTANT, USER
from app.chats.records import CUT
from app.ui.chat.message_actions import CONTINUE, REGENERATE
from tests.ui.chat_app_module import starter_chat_app, wait_for
from tests.ui.conftest import REPLY_TIMEOUT_MS

pytestmark = pytest.mark.slow

QUESTIONS = (
    "What is the capital of Italy?",
    "How many days are in a week?",
    "Name a colour of the sky.",
    "What do bees make?",
    "Why do we sleep at night?",
    "What is the opposite of hot?",
)
MAX_TOKENS = 48


@pytest.fixture(scope="module")
def app(qapp, tmp_path_factory) -> Iterator:
    with starter_chat_app(tmp_path_factory.mktemp("data")) as parts:
        page = parts.window.chat
        assert page.completion_mode  # a base model starts in the text box
        page.completion.chat_anyway_button.click()
        yield parts


def _ask(app, question: str, max_tokens: int = MAX_TOKENS):
    page = app.window.chat
    page.session.new_conversation()
    page.session.set_conversation_settings("", {"max_tokens": max_tokens})
    page.input.setPlainText(question)
    page.send_button.click()
    (finished,) = wait_for(app.engine.reply_finished, REPLY_TIMEOUT_MS)
    return finished, page.session.model.messages()[-1]


def test_the_starter_answers_briefly_and_stops_by_itself(app) -> None:
    page = app.window.chat
    note = page.base_note
    assert note.isVisible() and "base model" in note.text.text()
    assert note.download_button.isVisible() and "Instruct" in note.download_button.text()
    assert "question-and-answer" in page.status.template_label.text()  # not "gemma template"

    ended_by_itself = 0
    for question in QUESTIONS:
        finished, reply = _ask(app, question)
        assert reply.role == "assistant" and reply.status in ("done", CUT)
        if finished.stop_reason == "stop" and finished.generated_tokens < MAX_TOKENS:
            ended_by_itself += 1
        for marker in (USER, ASSISTANT, "<start_of_turn>", "<end_of_turn>"):
            assert marker not in reply.content, (question, reply.content)
        assert question.lower() not in reply.content.lower(), (question, reply.content)
        assert reply.content == reply.content.strip()
    assert ended_by_itself >= len(QUESTIONS) - 1
    assert note.isVisible()  # the note stays while the chat is open


def _button(page, row: int, name: str) -> QRect | None:
    page.view.executeDelayedItemsLayout()
    index = page.session.model.index(row)
    return page.view.delegate.button_rect(page.view.visualRect(index), index, name)


def test_a_reply_cut_at_the_token_limit_says_so_and_continue_goes_on(app, qtbot) -> None:
    page = app.window.chat
    finished, reply = _ask(app, "Tell me a long story about a dragon and a knight.", 4)
    assert finished.stop_reason == "length"
    assert reply.status == CUT and reply.content
    assert _button(page, 1, REGENERATE) is not None
    rect = _button(page, 1, CONTINUE)
    assert rect is not None  # Continue under the cut reply

    qtbot.mouseClick(page.view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    (more,) = wait_for(app.engine.reply_finished, REPLY_TIMEOUT_MS)
    model = page.session.model
    assert model.rowCount() == 2  # the same reply grew: no new message
    grown = model.message_at(1)
    assert grown.id == reply.id and grown.content.startswith(reply.content)
    assert len(grown.content) > len(reply.content) and more.generated_tokens > 0
    assert app.store.message(reply.id).content == grown.content  # saved as shown


def test_esc_stops_the_reply_being_written(app, qtbot) -> None:
    page = app.window.chat
    page.session.new_conversation()
    page.session.set_conversation_settings("", {"max_tokens": 400})
    page.input.setFocus(Qt.FocusReason.OtherFocusReason)
    qtbot.keyClicks(page.input, "Tell me a long story about a dragon and a knight.")
    qtbot.keyClick(page.input, Qt.Key.Key_Return)
    assert page.session.generating and page.send_button.text() == "Stop"
    qtbot.keyClick(page.input, Qt.Key.Key_Escape)  # before its prompt is even read
    (finished,) = wait_for(app.engine.reply_finished, REPLY_TIMEOUT_MS)
    assert finished.stop_reason == "cancelled"
    assert not page.session.generating and page.send_button.text() == "Send"
    assert page.session.model.messages()[-1].status == "stopped"
