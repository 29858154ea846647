"""The chat's flow, without widgets: send, stream into the store and the model, stop,
regenerate, edit-and-resend. The page wires widgets to it; tests drive it directly.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import fields, replace

from PySide6.QtCore import QObject, QTimer, Signal

from app.chats.base_model_frame import STOPS, clean_reply
from app.chats.records import (
    CUT,
    DONE,
    FAILED,
    INTERRUPTED,
    STOPPED,
    STREAMING,
    Conversation,
    ReplyStats,
)
from app.chats.store import ChatStore
from app.chats.streaming_reply import StreamingReply
from app.engine.messages import (
    ChatMessage,
    ContextTrimmed,
    Finished,
    Generate,
    Loaded,
    SamplingSettings,
    Token,
)
from app.services.engine_client import EngineClient
from app.services.engine_events import listen_to_engine
from app.ui.chat.message_model import MessageListModel

log = logging.getLogger(__name__)

SAVE_INTERVAL_S = 0.5  # a crash loses at most this much of a streaming reply
TITLE_LENGTH = 48
OPEN_PAGE = 200  # newest messages read when a conversation opens; older ones on scrolling up


def sampling_from_dict(values: dict) -> SamplingSettings:
    """SamplingSettings from a conversation's stored JSON (unknown keys ignored)."""
    known = {f.name for f in fields(SamplingSettings)}
    clean = {k: v for k, v in values.items() if k in known}
    if "stop" in clean:
        clean["stop"] = tuple(str(s) for s in clean["stop"] if s)
    return SamplingSettings(**clean)


class ChatSession(QObject):
    """Signals:
    conversation_opened(Conversation): a conversation is shown in the model.
    conversations_changed(): titles/order changed (refresh the list).
    generating_changed(bool): a reply started or ended.
    context_used(int): tokens in the engine's context after the last token/reply.
    reply_stats(Finished): the last reply's numbers (tokens/s for the status bar).
    context_trimmed(ContextTrimmed): the reply being generated left out the conversation's
        oldest messages to fit the context.
    reply_failed(str): this chat's reply failed, and why (an API request's failure is not one).
    """

    conversation_opened = Signal(object)
    conversations_changed = Signal()
    generating_changed = Signal(bool)
    context_used = Signal(int)
    reply_stats = Signal(object)
    context_trimmed = Signal(object)
    reply_failed = Signal(str)

    def __init__(
        self, store: ChatStore, engine: EngineClient, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.store = store
        self.engine = engine
        self.model = MessageListModel(self)
        self.conversation: Conversation | None = None
        self._reply: StreamingReply | None = None
        self._reply_conversation: int | None = None
        self._request_id: str | None = None
        self._framed = False  # the reply streaming is a base model's, in the Q&A frame
        self._reply_prefix = ""  # a cut reply's text before the part now streaming
        self._base_model = False  # the model replying is a base model (kept over a reload)
        # What the settings panel holds while no chat is open: the next new chat starts with it.
        self._new_chat_settings: tuple[str, dict] = ("", {})
        self._save_timer = QTimer(self)
        self._save_timer.setInterval(int(SAVE_INTERVAL_S * 1000))
        self._save_timer.timeout.connect(self._on_save_timer)
        listen_to_engine(engine, self)

    @property
    def generating(self) -> bool:
        return self._request_id is not None

    @property
    def frames_base_model(self) -> bool:
        """Whether replies come from a base model, asked in a question-and-answer frame
        (app/chats/base_model_frame.py) rather than through a chat template."""
        loaded = self.engine.loaded
        return bool(loaded.base_model) if loaded is not None else self._base_model

    # ---- conversations ---------------------------------------------------------------

    def open_conversation(self, conversation_id: int) -> None:
        if self._reply is not None:
            self._reply.flush()  # the store must hold what the model shows
        self.conversation = self.store.conversation(conversation_id)
        messages = self.store.messages_before(conversation_id, None, OPEN_PAGE)
        if self._reply is not None and self._reply_conversation == conversation_id:
            messages = [
                m if m.id != self._reply.message_id else replace(m, content=self._reply.text)
                for m in messages
            ]
        self.model.set_messages(
            messages,
            older=(lambda before, n: self.store.messages_before(conversation_id, before, n))
            if len(messages) == OPEN_PAGE
            else None,
        )
        self.conversation_opened.emit(self.conversation)

    def new_conversation(self) -> Conversation:
        if self.conversation is not None:
            system, sampling = self.conversation.system_prompt, self.conversation.sampling
        else:
            system, sampling = self._new_chat_settings
        conversation = self.store.create_conversation(system_prompt=system, sampling=dict(sampling))
        self.conversations_changed.emit()
        self.open_conversation(conversation.id)
        return conversation

    def delete_conversation(self, conversation_id: int) -> None:
        if self._reply_conversation == conversation_id:
            self.stop()
        self.store.delete_conversation(conversation_id)
        if self.conversation and self.conversation.id == conversation_id:
            self.conversation = None
            self.model.set_messages([])
        self.conversations_changed.emit()

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        self.store.rename_conversation(conversation_id, title)
        if self.conversation and self.conversation.id == conversation_id:
            self.conversation = self.store.conversation(conversation_id)
        self.conversations_changed.emit()

    def update_settings(self, system_prompt: str, sampling: dict) -> None:
        if self.conversation is None:
            # Set before the first message: the chat that message starts takes them (they were
            # dropped, so a first reply ignored the max tokens and system prompt shown).
            self._new_chat_settings = (system_prompt, dict(sampling))
            return
        self.store.set_system_prompt(self.conversation.id, system_prompt)
        self.store.set_sampling(self.conversation.id, sampling)
        self.conversation = self.store.conversation(self.conversation.id)

    def set_conversation_settings(self, system_prompt: str, sampling: dict) -> None:
        """Change the open conversation's settings from code (the panel shows them)."""
        self.update_settings(system_prompt, sampling)
        if self.conversation is not None:
            self.conversation_opened.emit(self.conversation)

    # ---- replies ---------------------------------------------------------------------

    def send(self, text: str) -> bool:
        """Add a user message and start the reply. False when it cannot start now."""
        text = text.strip()
        if not text or self.generating:
            return False
        if self.conversation is None:
            self.new_conversation()
        assert self.conversation is not None
        if not self.store.messages(self.conversation.id) and self.conversation.title == "New chat":
            self.store.rename_conversation(self.conversation.id, _title_from(text))
            self.conversation = self.store.conversation(self.conversation.id)
        self.model.append_message(self.store.add_message(self.conversation.id, "user", text))
        self._start_reply()
        self.conversations_changed.emit()
        return True

    def regenerate(self) -> bool:
        """Generate a new version of the last reply; the earlier ones are kept."""
        if self.generating or self.conversation is None:
            return False
        messages = self.store.messages(self.conversation.id)
        if not messages or messages[-1].role != "assistant":
            return False
        reply = self.store.start_new_version(messages[-1].id, self._model_path())
        self.model.update_message(reply)
        self._stream_into(reply.id)  # its history leaves out the streaming row itself
        return True

    def show_version(self, message_id: int, number: int) -> bool:
        """Show version `number` of a reply (the history uses the version shown)."""
        if self._reply is not None and self._reply.message_id == message_id:
            return False  # it is being written
        try:
            self.model.update_message(self.store.show_version(message_id, number))
        except KeyError:
            return False
        return True

    def edit_and_resend(self, message_id: int, text: str) -> bool:
        """Replace a user message (and everything after it) and reply again."""
        text = text.strip()
        if self.generating or self.conversation is None or not text:
            return False
        self.store.delete_messages_from(self.conversation.id, message_id)
        self.model.remove_from(message_id)
        self.model.append_message(self.store.add_message(self.conversation.id, "user", text))
        self._start_reply()
        return True

    def continue_reply(self) -> bool:
        """Go on with the last reply where its token limit cut it (the same message grows)."""
        if self.generating or self.conversation is None:
            return False
        messages = self.store.messages(self.conversation.id)
        if not messages or messages[-1].role != "assistant" or messages[-1].status != CUT:
            return False
        reply = messages[-1]
        history = self._history()  # with the cut reply, before it is marked streaming
        self.store.update_message(reply.id, reply.content, STREAMING)
        self.model.update_message(replace(reply, status=STREAMING))
        self._stream_into(reply.id, history, continuing=reply.content)
        return True

    def stop(self) -> None:
        if self._request_id is not None:  # only this chat's reply: API requests run on
            self.engine.stop(self._request_id)

    def _history(self) -> tuple[ChatMessage, ...]:
        assert self.conversation is not None
        history = []
        if self.conversation.system_prompt.strip():
            history.append(ChatMessage("system", self.conversation.system_prompt.strip()))
        for m in self.store.messages(self.conversation.id):
            if m.status in (DONE, STOPPED, INTERRUPTED, CUT) and m.content:
                history.append(ChatMessage(m.role, m.content))
        return tuple(history)

    def _model_path(self) -> str | None:
        loaded = self.engine.loaded or None
        if loaded:
            return loaded.model_path
        return self.engine.last_options.model_path if self.engine.last_options else None

    def _start_reply(self) -> None:
        assert self.conversation is not None
        placeholder = self.store.add_message(
            self.conversation.id, "assistant", "", status=STREAMING, model=self._model_path()
        )
        self.model.append_message(placeholder)
        self._stream_into(placeholder.id)

    def _stream_into(
        self, message_id: int, history: tuple[ChatMessage, ...] | None = None, continuing: str = ""
    ) -> None:
        """Generate a reply to `history` (default: the conversation's) into the streaming
        message row `message_id`: empty, or holding `continuing`, a reply cut at its token limit
        that this one goes on from (the last message of `history`)."""
        assert self.conversation is not None
        history = history if history is not None else self._history()
        self._reply = StreamingReply(
            self.store, message_id, text=continuing, interval=SAVE_INTERVAL_S
        )
        self._reply_prefix = continuing
        self._reply_conversation = self.conversation.id
        self._request_id = uuid.uuid4().hex
        self._save_timer.start()
        self.generating_changed.emit(True)
        self.engine.generate(self._command(self._request_id, history, bool(continuing)))

    def _command(
        self, request_id: str, history: tuple[ChatMessage, ...], continuing: bool
    ) -> Generate:
        """The engine's command for a reply to `history` (whose last message is the reply to
        go on from when `continuing`): through the chat template, or for a base model as the
        next answer of a question-and-answer transcript, cut where the next question starts."""
        assert self.conversation is not None
        sampling = sampling_from_dict(self.conversation.sampling)
        self._framed = self.frames_base_model
        if not self._framed:
            return Generate(
                request_id, sampling=sampling, messages=history, continue_reply=continuing
            )
        # The engine makes the transcript (and leaves out the oldest turns to fit the context).
        framed = replace(sampling, stop=tuple(sampling.stop) + STOPS)
        return Generate(
            request_id, sampling=framed, messages=history, continue_reply=continuing, framed=True
        )

    def _end_reply(self, status: str, finished: Finished | None = None, error: str = "") -> None:
        reply = self._reply
        if reply is None:
            return
        stats: ReplyStats = {"error": error} if error else {}
        if finished is not None:
            stats |= {
                "prompt_tokens": finished.prompt_tokens,
                "generated_tokens": finished.generated_tokens,
                "tokens_per_second": finished.tokens_per_second,
                "time_to_first_token_s": finished.time_to_first_token_s,
            }
            whole = self._reply_prefix + finished.text
            if finished.text and len(whole) >= len(reply.text):
                reply.text = whole  # the engine's text is authoritative
        if self._framed and finished is not None:  # cut off, it keeps the text as shown
            reply.text = clean_reply(reply.text)
        try:
            self.model.update_message(reply.finish(status, **stats))
        except KeyError:  # its conversation was deleted while it streamed
            log.info("reply %s finished after its conversation was deleted", reply.message_id)
        self._reply = None
        self._reply_prefix = ""
        self._reply_conversation = None
        self._request_id = None
        self._save_timer.stop()
        self.generating_changed.emit(False)

    def flush(self) -> None:
        """Write the streaming reply's text now."""
        if self._reply is not None:
            self._reply.flush()

    def close(self) -> None:
        """The window is closing: stop a running reply and keep it as 'stopped'."""
        if self._reply is not None:
            self.engine.stop(self._request_id)
            self._end_reply(STOPPED)

    def _on_save_timer(self) -> None:
        if self._reply is not None:
            self._reply.flush()

    def on_engine_model_loaded(self, loaded: Loaded) -> None:
        self._base_model = bool(loaded.base_model)

    def on_engine_context_trimmed(self, trimmed: ContextTrimmed) -> None:
        if trimmed.request_id == self._request_id:
            self.context_trimmed.emit(trimmed)

    def on_engine_token(self, token: Token) -> None:
        if token.request_id != self._request_id or self._reply is None:
            return
        text = token.text.lstrip() if self._framed and not self._reply.text else token.text
        self._reply.append(text)
        self.model.append_text(self._reply.message_id, text)
        self.context_used.emit(token.n_past)

    def on_engine_reply_finished(self, finished: Finished) -> None:
        if finished.request_id != self._request_id:
            return
        status = {"cancelled": STOPPED, "length": CUT}.get(finished.stop_reason, DONE)
        self._end_reply(status, finished)
        self.context_used.emit(finished.n_past)
        self.reply_stats.emit(finished)

    def on_engine_crashed(self, _message: str) -> None:
        # Cut off, not failed: the partial reply is kept as 'interrupted' (as after the app
        # itself was killed), so the next message's history includes it.
        if self._request_id is not None:
            self._end_reply(INTERRUPTED)

    def on_engine_request_failed(self, request_id: str, message: str) -> None:
        if request_id != self._request_id:
            return
        log.warning("reply failed: %s", message)
        # In the conversation, kept with the reply: one line (a crash's output tail stays out)
        self._end_reply(FAILED, error=message.partition("\n")[0])
        self.reply_failed.emit(message)


def _title_from(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1].rstrip() + "…"
