"""Status bar pieces for the chat: loaded model, KV mode, tokens/s, context meter,
load progress, the int8-K kernel warning and the notice that a reply left out old messages."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QWidget

from app.engine.messages import ContextTrimmed, KernelWarning, KernelWarningKind, Loaded
from app.kv.kv_types import KvMode
from app.load.profile import LoadProfile
from app.platform import units as fmt
from app.platform.safe_text import safe_text
from app.ui.plain_text import plain_label, plain_tooltip

_WARNING_TEXT: dict[KernelWarningKind, str] = {
    "pair_not_compiled": "K/V pair not compiled: the int8-K kernel is not used (slow f16 path)",
    "converted_to_f16": "K/V converted to f16: the int8-K kernel is not used (slow path)",
    "fa_disabled": "Flash Attention is off: the int8-K kernel is not used",
    "attention_on_cpu": "attention runs on the CPU",
}


_BASE_MODEL_MODES = {
    "continuation": (
        "text continuation, no template",
        "The completion panel sends your text as it is: the model continues it.",
    ),
    "frame": (
        "question-and-answer frame",
        "A base model has no chat template: each reply is the next answer of a short "
        "question-and-answer transcript, cut where the next question starts.",
    ),
}


def kv_mode_label(mode: KvMode, flash_attn: bool = True) -> str:
    text = mode.words
    return text + (", Flash Attention" if flash_attn else ", no Flash Attention")


def model_name(path: str) -> str:
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return name[:-5] if name.lower().endswith(".gguf") else name


class ChatStatus(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatStatus")
        self.model_label = plain_label(QLabel("No model loaded"))
        self.model_label.setObjectName("statusModel")
        self.template_label = plain_label(QLabel(""))
        self.template_label.setObjectName("statusTemplate")
        self.template_label.hide()
        self._template: tuple[str, str] | None = None
        self._continuation = False
        self.kv_label = QLabel("")
        self.kv_label.setObjectName("statusKv")
        self.speed_label = QLabel("")
        self.speed_label.setObjectName("statusSpeed")
        self.context_meter = QProgressBar()
        self.context_meter.setObjectName("contextMeter")
        self.context_meter.setFixedWidth(170)
        self.context_meter.setTextVisible(True)
        self.context_meter.setRange(0, 1)
        self.context_meter.setValue(0)
        self.context_meter.setFormat("context –")
        self.warning_label = QLabel("")
        self.warning_label.setObjectName("statusWarning")
        self.warning_label.hide()
        self.trimmed_label = QLabel("")
        self.trimmed_label.setObjectName("statusContextTrimmed")
        self.trimmed_label.hide()
        self.busy_bar = QProgressBar()
        self.busy_bar.setObjectName("loadProgress")
        self.busy_bar.setRange(0, 0)  # llama.cpp reports no load percentage
        self.busy_bar.setFixedWidth(110)
        self.busy_bar.setTextVisible(False)
        self.busy_bar.hide()
        self.busy_label = plain_label(QLabel(""))
        self.busy_label.setMinimumWidth(220)
        self.busy_label.hide()
        layout = QHBoxLayout(self)
        layout.setContentsMargins(6, 0, 6, 0)
        layout.setSpacing(14)
        for w in (
            self.busy_bar,
            self.busy_label,
            self.warning_label,
            self.model_label,
            self.template_label,
            self.kv_label,
            self.speed_label,
            self.trimmed_label,
            self.context_meter,
        ):
            layout.addWidget(w, 0, Qt.AlignmentFlag.AlignVCenter)
        self._n_ctx = 0
        self._used = 0
        self._load_started = 0.0
        self._load_name = ""
        self._verb = "Loading"
        self._elapsed_timer = QTimer(self, interval=250)
        self._elapsed_timer.timeout.connect(self._tick)

    @property
    def context_used(self) -> int:
        return self._used

    def show_checking(self, ref: str) -> None:
        """A load is being checked before the engine gets it (the starter is assembled on
        first use, the memory it needs compared with what is free)."""
        self._verb = "Checking"
        self._start_busy(ref)

    def show_loading(self, options: LoadProfile) -> None:
        self._verb = "Loading"
        self._start_busy(options.model_path)

    def _start_busy(self, path: str) -> None:
        self._load_started = time.monotonic()
        self._load_name = safe_text(model_name(path), 80)
        self.model_label.setText("")
        self.busy_bar.show()
        self.busy_label.show()
        self._tick()
        self._elapsed_timer.start()

    def _tick(self) -> None:
        self.busy_label.setText(
            f"{self._verb} {self._load_name}… {time.monotonic() - self._load_started:.0f} s"
        )

    def end_checking(self, loaded: Loaded | None) -> None:
        """A checked load did not go to the engine: back to what is loaded, if anything."""
        if loaded is not None:
            self.show_loaded(loaded)
        else:
            self.show_unloaded()

    def hide_loading(self) -> None:
        self._elapsed_timer.stop()
        self.busy_bar.hide()
        self.busy_label.hide()

    def show_loaded(self, loaded: Loaded) -> None:
        self.hide_loading()
        self.model_label.setText(safe_text(model_name(loaded.model_path), 80))
        self.model_label.setToolTip(
            plain_tooltip(
                f"{safe_text(loaded.model_path, 500)}\n{safe_text(loaded.architecture, 40)}, "
                f"trained context {loaded.n_ctx_train:,}, loaded in {loaded.load_seconds:.1f} s"
            )
        )
        opts = loaded.options
        self.kv_label.setText(kv_mode_label(opts.kv, opts.flash_attn))
        # The MiB llama.cpp printed, in bytes: times 2**20 is exact, so the figure is unchanged.
        kv_bytes = sum(c.total_mib for c in loaded.kv_caches) * 1024**2
        kv_mib = fmt.size_number(kv_bytes, "MiB")
        self.kv_label.setToolTip(f"KV cache: {kv_mib} MiB in {len(loaded.kv_caches)} cache(s)")
        self._n_ctx = loaded.n_ctx
        self.set_context_used(0)
        self.speed_label.setText("")
        self.show_template(loaded.chat_format, loaded.chat_template_notice)

    def show_base_model_mode(self, mode: str) -> None:
        """A base model uses no chat template: say what it uses instead ("continuation": the
        completion panel; "frame": the chat's question-and-answer frame; "": a chat model)."""
        self._continuation = bool(mode)
        if mode:
            self.template_label.setText(_BASE_MODEL_MODES[mode][0])
            self.template_label.setToolTip(_BASE_MODEL_MODES[mode][1])
            self.template_label.show()
        elif self._template is not None:
            self.show_template(*self._template)

    def show_template(self, chat_format: str, notice: str = "") -> None:
        """Which chat template the replies use; a fallback is marked, with why in the tooltip."""
        self._template = (chat_format, notice)
        if self._continuation:
            return
        own = chat_format == "gguf"
        self.template_label.setText(
            "model's template"
            if own
            else f"⚠ {chat_format} template"
            if notice
            else f"{chat_format} template"
        )
        self.template_label.setToolTip(
            plain_tooltip(notice)
            or (
                "Prompts use the chat template stored in the model file."
                if own
                else f"The model file has no chat template: the plain {chat_format} one is used."
            )
        )
        self.template_label.show()

    def show_unloaded(self, text: str = "No model loaded") -> None:
        self.hide_loading()
        self.model_label.setText(text)
        self.model_label.setToolTip("")
        self.kv_label.setText("")
        self.template_label.hide()
        self.speed_label.setText("")
        self._n_ctx = 0
        self.set_context_used(0)

    def set_warnings(self, warnings: tuple[KernelWarning, ...]) -> None:
        """The kernel warnings of the loaded model (EngineClient.kernel_warnings_changed)."""
        if not warnings:
            self.warning_label.hide()
            self.warning_label.setToolTip("")
            return
        first = _WARNING_TEXT[warnings[0].kind]
        more = f" (+{len(warnings) - 1} more)" if len(warnings) > 1 else ""
        self.warning_label.setText(f"⚠ {first}{more}")
        self.warning_label.setToolTip("\n".join(w.text for w in warnings))
        self.warning_label.show()

    def show_context_trimmed(self, trimmed: ContextTrimmed) -> None:
        """The last reply left out the conversation's oldest messages to fit the context."""
        n = trimmed.dropped_messages
        self.trimmed_label.setText(
            f"Context full: {n} oldest message{'s' if n != 1 else ''} left out"
        )
        self.trimmed_label.setToolTip(
            f"The conversation is longer than the {trimmed.n_ctx:,}-token context, so its {n} "
            f"oldest message(s) were left out of this reply (its prompt: "
            f"{trimmed.prompt_tokens:,} tokens). The model did not see them."
        )
        self.trimmed_label.show()

    def clear_context_trimmed(self) -> None:
        self.trimmed_label.hide()
        self.trimmed_label.setToolTip("")

    def set_context_used(self, used: int) -> None:
        self._used = used
        if self._n_ctx <= 0:
            self.context_meter.setRange(0, 1)
            self.context_meter.setValue(0)
            self.context_meter.setFormat("context –")
            return
        self.context_meter.setRange(0, self._n_ctx)
        self.context_meter.setValue(min(used, self._n_ctx))
        self.context_meter.setFormat(f"{used:,} / {self._n_ctx:,} tokens")
        self.context_meter.setToolTip(f"Context used: {used:,} of {self._n_ctx:,} tokens")

    def set_speed(self, tokens_per_second: float) -> None:
        self.speed_label.setText(f"{tokens_per_second:.1f} tok/s" if tokens_per_second else "")
