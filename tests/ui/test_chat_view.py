"""Chat widgets without the engine: the 2,000-message view, input keys, conversation list,
per-chat settings, settings reset notice."""

from __future__ import annotations

import json
import time
from itertools import pairwise
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from app.chats.records import DONE, STREAMING, Message
from app.chats.store import ChatStore
from app.ui.chat.input_box import InputBox
from app.ui.chat.message_delegate import EDIT
from app.ui.chat.message_model import MessageListModel
from app.ui.chat.message_view import MessageView
from tests.waits import HANG_GUARD_MS

_REPLY = (
    "Here is **Markdown** with `inline code`, a list and a block:\n\n- one\n- two\n\n"
    "```python\nfor i in range(3):\n    print(i)\n```\n"
)


def _fill(store: ChatStore, n: int) -> int:
    conversation = store.create_conversation("Long chat")
    for i in range(n):
        store.add_message(
            conversation.id,
            "user" if i % 2 == 0 else "assistant",
            f"Question {i}: what about this?" if i % 2 == 0 else f"Reply {i}. {_REPLY}",
        )
    return conversation.id


@pytest.mark.slow
def test_2000_messages_open_fast_and_tokens_touch_only_last_row(qtbot, tmp_path: Path) -> None:
    store = ChatStore(tmp_path / "chat.sqlite3")
    conversation_id = _fill(store, 2000)
    model = MessageListModel()
    view = MessageView(model)
    qtbot.addWidget(view)
    view.resize(1000, 800)
    view.show()
    started = time.perf_counter()
    model.set_messages(store.messages(conversation_id))
    qtbot.waitUntil(
        lambda: view.verticalScrollBar().value() == view.verticalScrollBar().maximum() > 0,
        timeout=HANG_GUARD_MS,
    )
    opened_s = time.perf_counter() - started

    reply = store.add_message(conversation_id, "assistant", "", status=STREAMING)
    model.append_message(reply)
    last_row = model.rowCount() - 1
    built_before = dict(view.delegate.documents_built)
    changed: list[tuple[int, int]] = []
    model.dataChanged.connect(
        lambda top, bottom, _roles=(): changed.append((top.row(), bottom.row()))
    )
    started = time.perf_counter()
    for i in range(200):
        model.append_text(reply.id, f"token{i} ")
        if i % 5 == 4:  # ~5 tokens per frame, like a fast GPU
            model.publish_pending()
            qtbot.wait(0)
    model.publish_pending()
    qtbot.wait(0)
    stream_s = time.perf_counter() - started

    assert changed and set(changed) == {(last_row, last_row)}
    rebuilt = {
        mid for mid, n in view.delegate.documents_built.items() if n != built_before.get(mid)
    }
    assert rebuilt == {reply.id}  # no other message was re-rendered
    assert model.message_at(last_row).content.endswith("token199 ")
    qtbot.waitUntil(
        lambda: view.verticalScrollBar().value() == view.verticalScrollBar().maximum(),
        timeout=HANG_GUARD_MS,
    )
    print(
        f"\n2,000 messages: view opened in {opened_s * 1000:.0f} ms; "
        f"200 tokens streamed in {stream_s * 1000:.0f} ms "
        f"({len(changed)} row updates, {len(view.delegate.documents_built)} documents built)"
    )
    store.close()


def test_enter_sends_and_shift_enter_adds_a_line(qtbot) -> None:
    box = InputBox()
    qtbot.addWidget(box)
    sent = []
    box.submitted.connect(sent.append)
    qtbot.keyClicks(box, "first line")
    qtbot.keyClick(box, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(box, "second line")
    assert sent == []
    qtbot.keyClick(box, Qt.Key.Key_Return)
    assert sent == ["first line\nsecond line"]


def test_enter_sends_the_text_exactly_as_typed(qtbot) -> None:
    """French puts a no-break space before '!' and '?': the message sent keeps it (Qt's
    toPlainText() made it a plain space)."""
    box = InputBox()
    qtbot.addWidget(box)
    sent = []
    box.submitted.connect(sent.append)
    box.insertPlainText("Bonjour\u00a0! Ça va\u00a0?")  # as a paste puts it
    qtbot.keyClick(box, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    box.insertPlainText("Oui.")
    qtbot.keyClick(box, Qt.Key.Key_Return)
    assert sent == ["Bonjour\u00a0! Ça va\u00a0?\nOui."]


@pytest.mark.slow
def test_conversation_list_new_search_rename_delete(qtbot, chat_app, monkeypatch) -> None:
    page = chat_app.window.chat
    qtbot.mouseClick(page.conversations.new_button, Qt.MouseButton.LeftButton)
    first = page.session.conversation
    chat_app.store.add_message(first.id, "user", "tell me about sourdough bread")
    page.session.rename_conversation(first.id, "Baking")
    qtbot.mouseClick(page.conversations.new_button, Qt.MouseButton.LeftButton)
    page.session.rename_conversation(page.session.conversation.id, "Travel plans")
    assert page.conversations.titles() == ["Travel plans", "Baking"]

    page.conversations.search_box.setText("sourdough")  # matches message text
    qtbot.waitUntil(lambda: page.conversations.titles() == ["Baking"], timeout=HANG_GUARD_MS)
    page.conversations.search_box.setText("travel")  # matches the title
    qtbot.waitUntil(lambda: page.conversations.titles() == ["Travel plans"], timeout=HANG_GUARD_MS)
    page.conversations.search_box.clear()
    qtbot.waitUntil(lambda: len(page.conversations.titles()) == 2, timeout=3000)

    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Cancel)
    page.conversations.ask_delete(first.id)
    assert len(page.conversations.titles()) == 2  # cancelled: kept
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    page.conversations.ask_delete(first.id)
    assert page.conversations.titles() == ["Travel plans"]
    assert [c.title for c in chat_app.store.conversations()] == ["Travel plans"]


def test_settings_are_kept_per_conversation(qtbot, chat_app) -> None:
    page = chat_app.window.chat
    panel = page.settings_panel
    a = page.session.new_conversation()
    page.open_conversation(a.id)
    panel.system_prompt.setPlainText("You are terse.")
    panel.temperature.setValue(0.2)
    panel.stop_strings.setPlainText("\\n\\n\nEND")
    panel.flush()
    b = page.session.new_conversation()
    page.open_conversation(b.id)
    panel.temperature.setValue(1.3)
    panel.flush()
    page.open_conversation(a.id)
    assert panel.temperature.value() == 0.2
    assert panel.system_prompt.toPlainText() == "You are terse."
    stored = chat_app.store.conversation(a.id)
    assert stored.system_prompt == "You are terse."
    assert stored.sampling["temperature"] == 0.2 and stored.sampling["stop"] == ["\n\n", "END"]
    assert chat_app.store.conversation(b.id).sampling["temperature"] == 1.3


def test_edit_button_opens_an_editor_in_the_message(qtbot, chat_app) -> None:
    page = chat_app.window.chat
    conversation = page.session.new_conversation()
    user = chat_app.store.add_message(conversation.id, "user", "Fix this sentence")
    chat_app.store.add_message(conversation.id, "assistant", "Done.", status=DONE)
    page.open_conversation(conversation.id)
    index = page.session.model.index(0)
    rect = page.view.delegate.button_rect(page.view.visualRect(index), index, EDIT)
    qtbot.mouseClick(page.view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    editor = page.view.editor
    assert editor is not None and page.editing.message_id == user.id
    assert editor.text_box.toPlainText() == "Fix this sentence" and page.input.toPlainText() == ""
    assert page.view.visualRect(index).contains(editor.geometry())  # in the message's row
    assert page.view.delegate.button_rect(page.view.visualRect(index), index, EDIT) is None
    qtbot.mouseClick(editor.cancel_button, Qt.MouseButton.LeftButton)
    assert page.view.editor is None and page.editing.message_id is None
    assert chat_app.store.message(user.id).content == "Fix this sentence"


def test_an_edit_without_a_model_stays_open_and_says_why(qtbot, chat_app) -> None:
    page = chat_app.window.chat
    conversation = page.session.new_conversation()
    user = chat_app.store.add_message(conversation.id, "user", "Fix this sentence")
    page.open_conversation(conversation.id)
    page.start_edit(user.id)
    editor = page.view.editor
    qtbot.keyClicks(editor.text_box, " please")
    qtbot.keyClick(editor.text_box, Qt.Key.Key_Return)
    assert page.view.editor is editor and editor.text == "Fix this sentence please"
    assert "No model is loaded" in chat_app.window.statusBar().currentMessage()
    assert chat_app.store.message(user.id).content == "Fix this sentence"


def test_sending_without_a_model_is_not_possible_and_says_why(qtbot, chat_app) -> None:
    page = chat_app.window.chat
    page.session.new_conversation()
    assert not page.send_button.isEnabled()
    assert "No model is loaded" in page.send_button.toolTip()
    page.input.setFocus()
    qtbot.keyClicks(page.input, "hello?")
    qtbot.keyClick(page.input, Qt.Key.Key_Return)
    assert page.session.model.rowCount() == 0  # nothing sent, nothing failed
    assert page.input.toPlainText() == "hello?"  # nothing lost either
    assert "No model is loaded" in chat_app.window.statusBar().currentMessage()
    assert chat_app.engine.engine_pid is None  # no engine was started for nothing


def test_newer_settings_file_is_reset_with_a_notice(qtbot, chat_data_dir: Path) -> None:
    from app.gui import build_app
    from app.platform.paths import data_dir

    (chat_data_dir / "settings.json").write_text(json.dumps({"version": 99}))
    parts = build_app(data_dir())
    try:
        parts.window.show()
        # The start tells the user once, in words (app/platform/state_files.py says which kind).
        assert any("newer version" in n and "defaults are used" in n for n in parts.notices)
        assert parts.settings.settings.type_k == "q8_0" and parts.settings.settings.type_v == "f16"
        assert list(chat_data_dir.glob("settings.json.bak-*"))
    finally:
        parts.window.close()
        parts.close()


def test_loaded_warnings_are_visible(qtbot) -> None:
    from app.engine.messages import KernelWarning, KvCacheInfo, Loaded
    from app.load.profile import LoadProfile
    from app.ui.chat.status_bar import ChatStatus

    status = ChatStatus()
    qtbot.addWidget(status)
    status.show()
    warning = KernelWarning(
        "converted_to_f16",
        "ggml_cuda_flash_attn_ext: converting K and V to f16 instead (slow)",
    )
    cache = KvCacheInfo(0, 2048, 18, 1, "q8_0", 0, "f16", 0, total_mib=10.0)
    loaded = Loaded(
        "/m/model.gguf",
        LoadProfile("/m/model.gguf", n_ctx=2048),
        1.0,
        2048,
        32768,
        "gemma3",
        "gguf",
        (cache,),
        (),
        (warning,),
        "",
        0.0,
    )
    status.show_loaded(loaded)
    status.set_warnings(loaded.warnings)  # EngineClient.kernel_warnings_changed, in the app
    assert status.warning_label.isVisible()
    assert "int8-K kernel is not used" in status.warning_label.text()
    assert warning.text in status.warning_label.toolTip()
    assert status.kv_label.text() == "K q8_0 / V f16, Flash Attention"
    assert status.model_label.text() == "model"
    status.set_context_used(512)
    assert status.context_meter.format() == "512 / 2,048 tokens"
    status.set_warnings(())
    assert not status.warning_label.isVisible()


def test_narrower_window_rewraps_every_message(qtbot) -> None:
    model = MessageListModel()
    view = MessageView(model)
    qtbot.addWidget(view)
    view.resize(1000, 800)
    view.show()
    long_text = "A sentence long enough to wrap onto more lines in a narrow window. " * 4
    model.set_messages(
        [
            Message(i + 1, 1, "user" if i % 2 == 0 else "assistant", f"{i} {long_text}", 0.0, 0.0)
            for i in range(600)
        ]
    )
    bar = view.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.value() == bar.maximum() > 0, timeout=HANG_GUARD_MS)
    wide_range = bar.maximum()
    view.resize(600, 800)
    qtbot.waitUntil(
        lambda: bar.maximum() > wide_range and bar.value() == bar.maximum(), timeout=HANG_GUARD_MS
    )
    rects = [view.visualRect(model.index(r)) for r in range(model.rowCount() - 6, model.rowCount())]
    assert all(a.bottom() < b.top() for a, b in pairwise(rects))  # no overlap


def test_the_window_is_never_smaller_than_1024x640(qtbot, chat_app) -> None:
    window = chat_app.window
    window.resize(800, 500)
    assert (window.width(), window.height()) == (1024, 640)  # the README's smallest window


def test_window_geometry_is_kept(qtbot, chat_data_dir: Path) -> None:
    from app.gui import build_app
    from app.platform.paths import data_dir

    first = build_app(data_dir())
    first.window.show()
    first.window.resize(1100, 733)
    qtbot.waitUntil(lambda: first.window.size().height() == 733, timeout=HANG_GUARD_MS)
    first.window.close()
    first.close()
    second = build_app(data_dir())
    try:
        # The height (the offscreen screen may clamp the width); the default is 820.
        assert second.window.height() == 733
        assert second.window.nav.count() >= 1 and second.window.nav.item(0).text() == "Chat"
    finally:
        second.window.close()
        second.close()


def test_model_picker_menu_and_load_options(qtbot, chat_app) -> None:
    page = chat_app.window.chat
    menu = page.picker.menu()
    menu.aboutToShow.emit()
    actions = [a for a in menu.actions() if a.text()]
    labels = [a.text() for a in actions]
    assert labels[0].startswith("Starter model: Gemma 3 270M")
    assert {"Open GGUF file…", "Load options…", "Unload model"} <= set(labels)

    actions[0].trigger()  # picking a model opens its load dialog; nothing loads yet
    dialog = page.load_dialog
    assert dialog is not None and dialog.isVisible()
    with qtbot.waitSignal(dialog.model_read, timeout=HANG_GUARD_MS):
        pass
    assert chat_app.engine.last_options is None
    assert (dialog.type_k.currentText(), dialog.type_v.currentText()) == ("q8_0", "f16")
    assert dialog.n_ctx.value() == 2048  # tests/ui/conftest.py's default load setting
    assert {"f16", "q8_0", "q4_0", "bf16"} <= {
        dialog.type_k.itemText(i) for i in range(dialog.type_k.count())
    }
    dialog.type_v.setCurrentText("q8_0")
    dialog.n_ctx.setValue(8192)
    chosen = dialog.chosen()
    assert (chosen.kv.label, chosen.n_ctx) == ("q8_0/q8_0", 8192)
    dialog.reject()


def test_every_kernel_warning_kind_has_words_in_the_chat_and_on_the_dashboard() -> None:
    from app.engine.messages import KERNEL_WARNING_KINDS
    from app.ui.chat.status_bar import _WARNING_TEXT
    from app.ui.dashboard.kernel_banner import WARNING_WORDS

    assert set(_WARNING_TEXT) == set(WARNING_WORDS) == set(KERNEL_WARNING_KINDS)


def test_the_base_model_note_downloads_a_small_chat_model_in_one_click(
    qtbot, hub_env, tiny_gguf
) -> None:
    """The completion panel's Download button (the starter's note) gets the first recommended
    instruct model's file from the Hub (the local test Hub here) into My models."""
    from app.gui import build_app
    from app.platform.paths import data_dir
    from app.ui.chat.base_model_note import FIRST_CHAT_MODEL
    from app.ui.models.page import ModelsPage

    hub_env.add_repo(FIRST_CHAT_MODEL.repo_id, {FIRST_CHAT_MODEL.file: tiny_gguf()})
    parts = build_app(data_dir())
    try:
        parts.window.show()
        button = parts.window.chat.completion.download_button
        assert FIRST_CHAT_MODEL.name in button.text()
        models = parts.pages.models
        with qtbot.waitSignal(models.download_finished, timeout=HANG_GUARD_MS) as done:
            button.click()
            assert isinstance(parts.window.pages.currentWidget(), ModelsPage)
            assert models.tabs.currentIndex() == ModelsPage.TAB_DOWNLOADS
        assert Path(done.args[0]).name == FIRST_CHAT_MODEL.file
        assert Path(done.args[0]).is_file()
    finally:
        parts.window.close()
        parts.close()
