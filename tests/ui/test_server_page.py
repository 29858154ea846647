"""The Server page in the real app on the real engine: started from the page, a request from
the real `openai` client shows in its log, queued with a chat reply (never interleaved), and
the dashboard marks it as it marks the chat's."""

from __future__ import annotations

import threading

import pytest
from openai import BadRequestError, OpenAI
from PySide6.QtCore import Qt

from app.ui.dashboard.page import DashboardPage
from app.ui.server_page import ServerPage
from tests.ui.conftest import REPLY_TIMEOUT_MS
from tests.waits import HANG_GUARD_MS

pytestmark = pytest.mark.slow


def test_server_started_from_the_app_answers_and_logs_beside_the_chat(qtbot, loaded_chat_app):
    app = loaded_chat_app
    page = app.window.findChild(ServerPage)
    dashboard = app.window.findChild(DashboardPage)
    app.window.show_page("Server")
    page.port.setValue(0)  # any free port
    with qtbot.waitSignal(page.service.started, timeout=HANG_GUARD_MS):
        page.start_button.click()
    base_url = page.base_url.text()
    assert page.state.text() == f"Running at {base_url}" and base_url.endswith("/v1")
    assert base_url in page.example.toPlainText()
    prompts_before = sum(m.kind == "prompt" for m in dashboard.sampler.recording.markers)

    order: list[str] = []
    app.engine.token_received.connect(lambda token: order.append(token.request_id))
    api_reply: dict[str, str] = {}

    def ask() -> None:
        client = OpenAI(base_url=base_url, api_key="none", max_retries=0, timeout=120)
        # a completion: the starter is a base model, which the server refuses a chat
        chunks = client.completions.create(
            model="any", prompt="Name a fruit:", max_tokens=10, temperature=0, stream=True
        )
        api_reply["text"] = "".join(c.choices[0].text for c in chunks)

    chat = app.window.chat
    chat.session.new_conversation()
    chat.session.set_conversation_settings("", {"max_tokens": 10, "temperature": 0.0})
    caller = threading.Thread(target=ask)
    with qtbot.waitSignal(page.service.request_logged, timeout=REPLY_TIMEOUT_MS) as logged:
        with qtbot.waitSignal(app.engine.prompt_started, timeout=REPLY_TIMEOUT_MS):
            caller.start()  # the API request reaches the engine first ...
        qtbot.keyClicks(chat.input, "Name a colour.")
        qtbot.keyClick(chat.input, Qt.Key.Key_Return)  # ... and the chat's waits its turn
    with qtbot.waitSignal(app.engine.reply_finished, timeout=REPLY_TIMEOUT_MS):
        pass  # the chat's reply, after the API's
    caller.join(30)

    record = logged.args[0]
    assert record.status == 200 and record.completion_tokens == 10
    assert api_reply["text"].strip()
    assert chat.session.model.messages()[-1].content.strip()
    # one reply's tokens, then the other's: never interleaved
    runs = [rid for i, rid in enumerate(order) if i == 0 or order[i - 1] != rid]
    assert len(runs) == 2 and runs[0] == record.request_id
    assert page.log.item(0, 2).text() == "POST /v1/completions"
    assert page.log.item(0, 3).text() == "200" and float(page.log.item(0, 5).text()) > 0
    prompts = sum(m.kind == "prompt" for m in dashboard.sampler.recording.markers)
    assert prompts == prompts_before + 2  # the API's generation and the chat's

    with qtbot.waitSignal(page.service.stopped, timeout=HANG_GUARD_MS):
        page.start_button.click()
    assert page.state.text() == "Stopped" and page.address.isEnabled()


def test_another_address_without_a_key_is_refused_in_one_sentence(qtbot, chat_app):
    page = chat_app.window.findChild(ServerPage)
    page.address.setCurrentText("0.0.0.0")
    page.key.clear()
    page.start_button.click()
    assert not page.service.running
    assert "needs an API key" in page.state.text() and "\n" not in page.state.text()


def test_a_prompt_longer_than_the_context_is_a_400_from_the_app_s_server(qtbot, loaded_chat_app):
    """The Server page serves through the app's engine client, which hands the engine's
    failure on with its kind: a prompt over the context is the client's to fix (400
    context_length_exceeded, as from `kvstudio serve`), not a server error (500)."""
    app = loaded_chat_app
    page = app.window.findChild(ServerPage)
    page.port.setValue(0)  # any free port
    with qtbot.waitSignal(page.service.started, timeout=HANG_GUARD_MS):
        page.start_button.click()
    n_ctx = app.engine.loaded.n_ctx
    failure: dict[str, object] = {}

    def ask() -> None:
        client = OpenAI(base_url=page.base_url.text(), api_key="none", max_retries=0, timeout=120)
        try:
            client.completions.create(model="any", prompt="word " * (n_ctx + 100), max_tokens=4)
        except BadRequestError as error:
            failure["error"] = error

    caller = threading.Thread(target=ask)
    with qtbot.waitSignal(page.service.request_logged, timeout=REPLY_TIMEOUT_MS) as logged:
        caller.start()
    caller.join(30)
    assert logged.args[0].status == 400
    error = failure["error"]
    assert isinstance(error, BadRequestError) and error.code == "context_length_exceeded"
    assert f"{n_ctx}-token context" in str(error)

    with qtbot.waitSignal(page.service.stopped, timeout=HANG_GUARD_MS):
        page.start_button.click()


def test_the_base_model_switch_lets_a_chat_through_as_the_command_line_option_does(
    qtbot, loaded_chat_app
):
    """Off (the default), the app's server refuses a chat to the starter, a base model, with a
    pointer to /v1/completions; the page's switch does what --allow-chat-on-base-model does."""
    app = loaded_chat_app
    page = app.window.findChild(ServerPage)
    app.window.show_page("Server")
    page.port.setValue(0)  # any free port
    assert not page.allow_chat_on_base_model.isChecked()
    answers: list[object] = []

    def chat() -> None:
        client = OpenAI(base_url=page.base_url.text(), api_key="none", max_retries=0, timeout=120)
        ask = [{"role": "user", "content": "Hi"}]
        try:
            answers.append(client.chat.completions.create(model="any", messages=ask, max_tokens=2))
        except BadRequestError as error:
            answers.append(error)

    for allowed in (False, True):
        if allowed:
            page.allow_chat_on_base_model.click()
            assert page.options().allow_chat_on_base_model
        with qtbot.waitSignal(page.service.started, timeout=HANG_GUARD_MS):
            page.start_button.click()
        assert not page.allow_chat_on_base_model.isEnabled()  # fixed while it runs
        caller = threading.Thread(target=chat)
        with qtbot.waitSignal(page.service.request_logged, timeout=REPLY_TIMEOUT_MS):
            caller.start()
        caller.join(30)
        with qtbot.waitSignal(page.service.stopped, timeout=HANG_GUARD_MS):
            page.start_button.click()
    refused, answered = answers
    assert isinstance(refused, BadRequestError) and refused.code == "model_not_chat"
    assert "/v1/completions" in str(refused)
    assert answered.choices[0].message.content is not None  # type: ignore[attr-defined]
    assert answered.usage.completion_tokens > 0  # type: ignore[attr-defined]
