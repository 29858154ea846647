"""The Chat page: conversations on the left, messages in the middle, per-chat settings on
the right, the model picker on top and the input at the bottom."""

from __future__ import annotations

import logging

from PySide6.QtCore import QModelIndex, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QMessageBox, QPushButton, QWidget

from app.chats.records import Conversation
from app.chats.store import ChatStore
from app.engine.build_info import BackendPairs
from app.engine.messages import Finished, KernelWarning, Loaded, TemplateFallback
from app.load.profile import LoadProfile
from app.models import starter
from app.services.engine_client import EngineClient
from app.services.engine_events import listen_to_engine
from app.services.local_workers import LocalWorkers
from app.services.message_bridge import MessageBridge
from app.state.settings import SettingsFile
from app.ui.chat import shortcuts
from app.ui.chat.base_model_note import IN_CHAT, BaseModelNote
from app.ui.chat.chat_modes import ChatModes
from app.ui.chat.completion_panel import CompletionPanel
from app.ui.chat.conversation_list import ConversationList
from app.ui.chat.engine_state import EngineStateNotices
from app.ui.chat.input_box import InputBox
from app.ui.chat.load_dialog import LoadDialog
from app.ui.chat.message_delegate import CONTINUE, COPY, EDIT, REGENERATE
from app.ui.chat.message_editing import MessageEditing
from app.ui.chat.message_view import MessageView
from app.ui.chat.model_loading import ModelLoading
from app.ui.chat.model_picker import STARTER, ModelPicker
from app.ui.chat.notices import EngineStopped, ModelOffer
from app.ui.chat.page_layout import lay_out
from app.ui.chat.session import ChatSession
from app.ui.chat.settings_panel import SettingsPanel
from app.ui.chat.status_bar import ChatStatus
from app.ui.plain_text import typed_text

log = logging.getLogger(__name__)

NO_MODEL_TO_SEND = "No model is loaded: load one with the picker above to send a message."


class ChatPage(QWidget):
    """Signals:
    model_resolve_failed(str): a chosen model could not be opened (before the engine).
    find_chat_model_requested(): the user asked for a chat model (the Models page's Discover).
    chat_model_download_requested(CuratedModel): download this small chat model now.
    """

    model_resolve_failed = Signal(str)
    find_chat_model_requested = Signal()
    chat_model_download_requested = Signal(object)

    def __init__(
        self,
        engine: EngineClient,
        store: ChatStore,
        settings: SettingsFile,
        bridge: MessageBridge,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("chatPage")
        self.engine, self.store, self.settings, self.bridge = engine, store, settings, bridge
        self.session = ChatSession(store, engine, self)
        self.local_workers = LocalWorkers(self)  # "Start a worker on this computer"

        self.conversations = ConversationList(store)
        self.view = MessageView(self.session.model)
        self.picker = ModelPicker(settings.settings)
        self.loading = ModelLoading(engine, settings, bridge, self.picker, self.local_workers, self)
        self.settings_panel = SettingsPanel()
        self.status = ChatStatus()
        self.input = InputBox()
        self.send_button = QPushButton("Send")
        self.send_button.setObjectName("sendButton")
        self.regenerate_button = QPushButton("Regenerate")
        self.regenerate_button.setObjectName("regenerateButton")
        self.settings_toggle = QPushButton("Chat settings")
        self.settings_toggle.setCheckable(True)
        self.settings_toggle.setObjectName("settingsToggle")
        self.offer = ModelOffer()
        self.offer_button = self.offer.starter_button
        self.stopped = EngineStopped()
        self.base_note = BaseModelNote(IN_CHAT, "Text continuation")
        self.base_note.hide()
        self.completion = CompletionPanel(engine)
        self.notices = EngineStateNotices(
            engine, self.status, self.picker, self.stopped, bridge, self
        )
        laid = lay_out(
            self,
            header=(self.picker, self.settings_toggle),
            view=self.view,
            composer=(self.input, self.send_button, self.regenerate_button),
            notices=(self.offer, self.base_note, self.stopped),
            completion=self.completion,
            sides=(self.conversations, self.settings_panel),
        )
        self.empty_state, self.stack = laid.empty_state, laid.stack
        self.modes, self.chat_area, self.splitter = laid.modes, laid.chat_area, laid.splitter
        self.editing = MessageEditing(store, self.view)  # in the message's own bubble
        self.chat_modes = ChatModes(
            engine, self.modes, self.chat_area, self.completion, self.base_note, self.status
        )
        self._connect()
        self.conversations.refresh()
        existing = store.conversations()
        if existing:
            self.open_conversation(existing[0].id)
        self._update_offer()
        self._update_buttons()

    def _connect(self) -> None:
        s, e = self.session, self.engine
        self.conversations.conversation_selected.connect(self.open_conversation)
        self.conversations.new_requested.connect(self.new_chat)
        self.conversations.rename_requested.connect(s.rename_conversation)
        self.conversations.delete_requested.connect(s.delete_conversation)
        self.conversations.conversation_exported.connect(
            lambda path: self.bridge.info(f"Chat exported to {path}.")
        )
        s.conversation_opened.connect(self._on_session_conversation_opened)
        s.conversations_changed.connect(self._on_session_conversations_changed)
        s.generating_changed.connect(self._on_session_generating_changed)
        s.context_used.connect(self.status.set_context_used)
        s.context_trimmed.connect(self.status.show_context_trimmed)
        s.reply_stats.connect(self._on_session_reply_stats)
        s.model.rowsInserted.connect(self._update_stack)
        s.model.rowsRemoved.connect(self._update_stack)
        s.model.modelReset.connect(self._update_stack)
        self.settings_panel.settings_changed.connect(s.update_settings)
        self.settings_toggle.toggled.connect(self.settings_panel.setVisible)
        self.input.submitted.connect(self.send)
        self.editing.resend_requested.connect(self.resend_edited)
        self.input.cancelled.connect(self._on_escape)
        self.send_button.clicked.connect(self._on_send_clicked)
        self.regenerate_button.clicked.connect(self.regenerate)
        self.view.delegate.action_requested.connect(self._on_message_action)
        self.view.delegate.version_requested.connect(s.show_version)
        self.picker.model_chosen.connect(self.open_load_dialog)
        self.picker.options_requested.connect(self.open_load_dialog)
        self.picker.unload_requested.connect(e.unload)
        self.offer.starter_requested.connect(self._on_offer_clicked)
        self.offer.find_chat_model_requested.connect(self.find_chat_model_requested)
        self.completion.find_chat_model_requested.connect(self.find_chat_model_requested)
        self.completion.download_requested.connect(self.chat_model_download_requested)
        self.base_note.download_requested.connect(self.chat_model_download_requested)
        self.notices.changed.connect(self._update_offer)
        shortcuts.install(self, self.stop, self.new_chat, self.conversations.search_box.setFocus)
        shortcuts.on_escape(self.chat_area, self._on_escape)
        shortcuts.chain_focus(
            self.settings_toggle, self.view, self.input, self.send_button, self.regenerate_button
        )
        self.loading.checking_started.connect(self._on_loading_checking_started)
        self.loading.resolve_failed.connect(self.model_resolve_failed)
        self.loading.not_started.connect(self._on_loading_not_started)
        # Only this chat's replies: the local server's requests share the engine.
        self.session.reply_failed.connect(self._on_chat_reply_failed)
        listen_to_engine(e, self)

    # ---- user actions -----------------------------------------------------------------

    def send(self, text: str) -> bool:
        if not self._can_send():
            self.bridge.info(NO_MODEL_TO_SEND)
            return False
        self.settings_panel.flush()
        ok = self.session.send(text)
        if ok:
            self.input.clear()
        return ok

    def resend_edited(self, message_id: int, text: str) -> bool:
        """Replace a message of the user's with `text` (and everything after it), reply again."""
        if not self._can_send():  # the editor stays open with the new text
            self.bridge.info(NO_MODEL_TO_SEND)
            return False
        self.settings_panel.flush()
        self.editing.close()
        ok = self.session.edit_and_resend(message_id, text)
        self.input.setFocus()
        return ok

    def stop(self) -> None:
        self.session.stop()

    def regenerate(self) -> bool:
        self.settings_panel.flush()
        return self.session.regenerate()

    def start_edit(self, message_id: int) -> None:
        """Edit a message of the user's in place: its bubble becomes an editor of its text."""
        if not self.session.generating:
            self.editing.start(message_id)

    def load_model(self, ref: str) -> None:
        """Load a .gguf path or 'starter' with its remembered load settings, else the defaults,
        once checked off the GUI thread (ModelLoading.load_model)."""
        self.loading.load_model(ref)

    def open_load_dialog(self, ref: str | None = None) -> None:
        """The load dialog for `ref` (None: the loaded model, else the last one, else the
        starter): its load settings, the live fit, and Load (Reload for the loaded model)."""
        self.loading.open_load_dialog(ref)

    def backend_pairs(self) -> BackendPairs:
        """The K/V pairs the running backend's GPU Flash Attention has."""
        return self.loading.backend_pairs()

    @property
    def load_dialog(self) -> LoadDialog | None:
        """The open load dialog."""
        return self.loading.load_dialog

    @property
    def load_refusal(self) -> QMessageBox | None:
        """The open "Load anyway?" box."""
        return self.loading.load_refusal

    @property
    def _resolving(self) -> bool:
        """Whether a load is being checked off the GUI thread (no second one starts)."""
        return self.loading.resolving

    def _on_loading_checking_started(self, ref: str) -> None:
        self.offer.hide()
        self.status.show_checking("starter model" if ref == STARTER else ref)

    def _on_loading_not_started(self) -> None:
        self.status.end_checking(self.engine.loaded)
        self.notices.show_current_model()
        self._update_offer()

    # ---- handlers ---------------------------------------------------------------------

    def open_conversation(self, conversation_id: int) -> None:
        self.settings_panel.flush()
        self.editing.cancel()
        self.session.open_conversation(conversation_id)

    def _on_session_conversation_opened(self, conversation: Conversation) -> None:
        self.status.clear_context_trimmed()  # it was about another conversation's reply
        self.settings_panel.show_settings(conversation.system_prompt, conversation.sampling)
        if not self.session.generating:  # the context this conversation's last reply used
            replies = [m for m in self.session.model.messages() if m.prompt_tokens]
            last = replies[-1] if replies else None
            self.status.set_context_used(
                (last.prompt_tokens or 0) + (last.generated_tokens or 0) if last else 0
            )
        self.conversations.refresh(current=conversation.id)
        self._update_stack()

    def new_chat(self) -> None:
        """Start a new conversation (New chat, Ctrl+N) and put the focus in its input."""
        self.settings_panel.flush()
        self.editing.cancel()
        self.session.new_conversation()
        self.input.setFocus()

    def _on_session_conversations_changed(self) -> None:
        current = self.session.conversation.id if self.session.conversation else None
        self.conversations.refresh(current=current)
        if current is None:
            self.settings_panel.show_settings("", {})
            self._update_stack()

    def _on_send_clicked(self) -> None:
        if self.session.generating:
            self.stop()
        else:
            self.send(typed_text(self.input))

    def _on_message_action(self, action: str, message_id: int) -> None:
        if action == COPY:
            QGuiApplication.clipboard().setText(self.store.message(message_id).content)
            self.bridge.info("Message copied.")
        elif action == EDIT:
            self.start_edit(message_id)
        elif action == REGENERATE:
            self.regenerate()
        elif action == CONTINUE:
            self.session.continue_reply()

    def _on_offer_clicked(self) -> None:
        self.load_model(STARTER)

    def _on_session_generating_changed(self, generating: bool) -> None:
        if generating:
            self.status.clear_context_trimmed()  # until this reply says otherwise
            self.editing.cancel()  # the conversation changes under it
        self._update_buttons()

    def _on_session_reply_stats(self, finished: Finished) -> None:
        self.status.set_speed(finished.tokens_per_second)

    def on_engine_loading_started(self, options: LoadProfile) -> None:
        self.status.show_loading(options)
        self.picker.show_model(options.model_path, loading=True)
        self._update_offer()

    def on_engine_model_loaded(self, loaded: Loaded) -> None:
        self.status.show_loaded(loaded)
        self.picker.show_model(loaded.model_path)
        self.view.delegate.model_name = loaded.model_path
        ref = self.loading.take_pending_ref() or loaded.model_path
        self.settings.remember_model(ref)
        self.picker.settings = self.settings.settings
        if loaded.chat_template_notice:
            self.bridge.warning(loaded.chat_template_notice)
        if loaded.warnings:
            self.bridge.warning(
                "The int8-K kernel is not running as asked: "
                + "; ".join(w.text for w in loaded.warnings[:3])
            )
        self._update_offer()
        self._update_mode()

    def on_engine_kernel_warnings(self, warnings: tuple[KernelWarning, ...]) -> None:
        self.status.set_warnings(warnings)

    def on_engine_event(self, event: object) -> None:
        if isinstance(event, TemplateFallback):
            self.status.show_template(event.chat_format, event.notice)
            self.bridge.warning(event.notice)

    def on_engine_load_failed(self, _message: str) -> None:
        self.loading.take_pending_ref()  # the failure is said by self.notices

    def on_engine_model_unloaded(self) -> None:
        if self.engine.last_options is None:  # unloaded, not waiting to reload after a crash
            self._update_mode()

    def _on_chat_reply_failed(self, message: str) -> None:
        if not self.notices.said_already(message):  # the reply's row says it too
            self.bridge.warning(f"The reply failed: {message}")

    def _on_escape(self) -> None:
        """Esc stops the reply being written; else it leaves editing a message."""
        if self.session.generating:
            self.stop()
        else:
            self.editing.cancel()

    # ---- view state -------------------------------------------------------------------

    @property
    def completion_mode(self) -> bool:
        """Whether the page shows the completion panel (a base model) instead of the chat."""
        return self.chat_modes.completion_mode

    def _update_mode(self) -> None:
        self.chat_modes.update()

    def _update_offer(self) -> None:
        nothing = (
            self.engine.loaded is None
            and self.engine.last_options is None
            and not self.engine.busy
            and not self._resolving
        )
        self.offer.show_starter(starter.is_available())
        self.offer.setVisible(nothing)
        self._update_buttons()

    def _update_stack(self, *_args: QModelIndex | int) -> None:
        self.stack.setCurrentWidget(
            self.view if self.session.model.rowCount() else self.empty_state
        )
        self._update_buttons()

    def on_engine_busy(self, _busy: bool) -> None:
        self._update_buttons()

    def _can_send(self) -> bool:
        """A reply can start: a model is loaded, loading, or reloads when a message is sent."""
        e = self.engine
        return e.loaded is not None or e.last_options is not None or e.busy or self._resolving

    def _update_buttons(self) -> None:
        generating = self.session.generating
        can_send = generating or self._can_send()
        self.send_button.setEnabled(can_send)
        self.send_button.setToolTip("" if can_send else NO_MODEL_TO_SEND)
        self.send_button.setText("Stop" if generating else "Send")
        self.send_button.setProperty("stop", generating)
        self.send_button.style().unpolish(self.send_button)
        self.send_button.style().polish(self.send_button)
        messages = self.session.model.messages()
        self.regenerate_button.setEnabled(
            not generating and bool(messages) and messages[-1].role == "assistant"
        )
