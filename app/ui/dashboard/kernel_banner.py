"""The warning banner shown when the int8-K kernel is not what runs: llama.cpp's own kernel
warnings (EngineClient.kernel_warnings_changed), in words, with llama.cpp's lines under them.
Notices about a conversation belong to the chat, not here."""

from __future__ import annotations

import html

from PySide6.QtWidgets import QLabel, QWidget

from app.engine.messages import KernelWarning, KernelWarningKind

BANNER_STYLE = (
    "background: #fff4e5; color: #8a4b00; border: 1px solid #f5c07a; "
    "border-radius: 6px; padding: 8px;"
)
WARNING_WORDS: dict[KernelWarningKind, str] = {
    "pair_not_compiled": "this K/V pair is not compiled into llama.cpp's Flash Attention kernels, "
    "so K and V are converted to f16 for attention",
    "converted_to_f16": "llama.cpp converts K and V to f16 for attention",
    "fa_disabled": "Flash Attention is off",
    "attention_on_cpu": "attention runs on the CPU, not on the GPU kernel",
}


class KernelBanner(QLabel):
    """`set_warnings(warnings)`: shown while there are any, hidden otherwise."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("", parent)
        self.setWordWrap(True)
        self.setStyleSheet(BANNER_STYLE)
        self.hide()

    def set_warnings(self, warnings: tuple[KernelWarning, ...]) -> None:
        if not warnings:
            self.hide()
            return
        words = "; ".join(dict.fromkeys(WARNING_WORDS[w.kind] for w in warnings))
        lines = "<br>".join(html.escape(w.text) for w in warnings[:4])
        self.setText(
            f"<b>The int8-K kernel is not in use:</b> {words}. The memory saving still holds; "
            f"the speed you see is not the int8-K kernel's.<br><small>{lines}</small>"
        )
        self.show()
