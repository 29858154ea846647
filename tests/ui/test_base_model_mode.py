"""A base model is not put in a chat (issue 12, point 1), in the real app offscreen with the real
engine and the starter model (Gemma 3 270M, a base model): the empty chat offers the starter as
text continuation and a way to a chat model; the loaded starter gets a completion box that
says what it is, whose text the model continues through a raw prompt (no chat template) at a
sensible length and repeat penalty; the page fits at 1024x640 and 1920x1080."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSize

from app.engine.messages import Generate
from app.ui.chat.completion_panel import BASE_MODEL_LINE
from app.ui.models.page import ModelsPage
from app.ui.plain_text import typed_text
from tests.ui.conftest import LOAD_TIMEOUT_MS, REPLY_TIMEOUT_MS
from tests.ui.layout_checks import LARGE, SMALL, layout_problems
from tests.waits import HANG_GUARD_MS

pytestmark = pytest.mark.slow

SCREENSHOT_SIZES = (QSize(1280, 800), QSize(1024, 640))


def _load_starter(qtbot, app) -> None:
    page = app.window.chat
    with qtbot.waitSignal(app.engine.model_loaded, timeout=LOAD_TIMEOUT_MS):
        page.offer_button.click()


def test_the_empty_chat_offers_the_starter_and_a_chat_model(qtbot, chat_app, tmp_path) -> None:
    window = chat_app.window
    page = window.chat
    assert page.offer.isVisible()
    assert page.offer_button.isVisible()
    assert page.offer_button.text() == "Try the starter (text continuation)"
    find = page.offer.find_button
    assert find.isVisible() and find.text() == "Find a chat model"
    for size in (SMALL, LARGE):
        assert layout_problems(window, size, [page.send_button, page.offer_button, find]) == []
    for size in SCREENSHOT_SIZES:
        window.resize(size)
        qtbot.waitUntil(lambda size=size: window.size() == size, timeout=HANG_GUARD_MS)
        window.grab().save(str(tmp_path / f"chat_empty_{size.width()}x{size.height()}.png"))

    find.click()
    models = window.pages.currentWidget()
    assert isinstance(models, ModelsPage)
    assert models.tabs.currentIndex() == ModelsPage.TAB_DISCOVER


def test_the_starter_continues_text_in_a_completion_box(qtbot, chat_app, tmp_path) -> None:
    app = chat_app
    page = app.window.chat
    sent: list[Generate] = []
    generate = app.engine.generate
    app.engine.generate = lambda command: (sent.append(command), generate(command))[1]
    _load_starter(qtbot, app)

    panel = page.completion
    assert page.completion_mode and panel.isVisible()
    assert panel.notice_text.isVisible() and panel.notice_text.text() == BASE_MODEL_LINE
    assert BASE_MODEL_LINE.startswith(
        "This is a base model: it continues your text rather than answering."
    )
    assert "no chat template" in panel.notice_text.toolTip()
    assert not page.send_button.isVisible()  # no chat input for a model that cannot chat
    # The status bar names no chat template: none is used here.
    assert page.status.template_label.text() == "text continuation, no template"
    assert (panel.length_box.value(), panel.penalty_box.value()) == (200, 1.3)
    for size in (SMALL, LARGE):
        actions = [panel.editor, panel.continue_button, panel.find_button]
        assert layout_problems(app.window, size, [*actions, panel.chat_anyway_button]) == []

    prompt = "The three primary colours are red, yellow and"
    panel.editor.setPlainText(prompt)
    panel.length_box.setValue(40)  # quick on two shared cores
    with qtbot.waitSignal(panel.session.finished, timeout=REPLY_TIMEOUT_MS) as done:
        panel.continue_button.click()
        assert panel.continue_button.text() == "Stop" and panel.editor.isReadOnly()
    assert len(sent) == 1
    command = sent[0]
    assert command.prompt == prompt and command.messages == ()  # raw: no chat template
    assert (command.sampling.max_tokens, command.sampling.repeat_penalty) == (40, 1.3)
    finished = done.args[0]
    assert 0 < finished.generated_tokens <= 40
    # The prompt as it is plus <bos>: a chat template would add a dozen turn tokens.
    assert finished.prompt_tokens <= 14
    text = typed_text(panel.editor)
    assert text.startswith(prompt) and len(text) > len(prompt)
    assert text[len(prompt) :] == finished.text
    assert panel.continue_button.text() == "Continue" and not panel.editor.isReadOnly()
    assert f"{finished.generated_tokens} tokens" in panel.result_label.text()

    # Continue again: the model gets the box's text exactly as it stands. A no-break space the
    # model wrote (or the user typed) was sent as a plain space.
    edited = f"{text}\u00a0and more"
    panel.editor.setPlainText(edited)
    with qtbot.waitSignal(panel.session.finished, timeout=REPLY_TIMEOUT_MS) as stopped:
        panel.continue_button.click()
        panel.continue_button.click()  # Stop: the prompt sent is what this checks
    assert stopped.args[0].stop_reason == "cancelled"
    assert sent[1].prompt == edited
    assert typed_text(panel.editor).startswith(edited)
    for size in SCREENSHOT_SIZES:
        app.window.resize(size)
        qtbot.waitUntil(lambda size=size: app.window.size() == size, timeout=HANG_GUARD_MS)
        app.window.grab().save(str(tmp_path / f"completion_{size.width()}x{size.height()}.png"))

    # Chat anyway: the conversation view comes back for this model.
    panel.chat_anyway_button.click()
    assert not page.completion_mode and page.send_button.isVisible()
    # Its replies come from the question-and-answer frame (app/chats/base_model_frame.py).
    assert page.status.template_label.text() == "question-and-answer frame"


def test_nothing_to_continue_says_so_in_the_panel(qtbot, chat_app) -> None:
    app = chat_app
    page = app.window.chat
    _load_starter(qtbot, app)
    panel = page.completion
    panel.continue_button.click()
    assert panel.error_label.isVisible()
    assert panel.error_label.text() == "Write some text first: the model continues it."
    assert not panel.session.generating
