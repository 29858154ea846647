"""Widgets that show a file's own text show it as plain text: a model file named with HTML
(`<b>`, `<img src=...>`), escape codes and bidi overrides is shown literally, never rendered;
the chat template in use, and why the file's own was refused, is shown the same way.

Before, QLabel guessed rich text: such a name rendered bold, and an <img> was loaded."""

from __future__ import annotations

import os
import time
from pathlib import Path

from PySide6.QtCore import Qt

from app.engine.messages import Loaded
from app.load.profile import LoadProfile
from app.ui.chat.status_bar import ChatStatus

AREA = "Templates and text from files"
NAME = "<b>bold<img src=x.png>\x1b[2J\u202eevil"  # no "/": it is a file name
NOTICE = (
    "The model's own chat template is not used: it tried to reach Python internals "
    "(access to attribute '__init__' of '<img src=x>' object is unsafe). "
    "Using the plain chatml template."
)


def _loaded(path: str, chat_format: str, notice: str) -> Loaded:
    options = LoadProfile(model_path=path, n_ctx=256)
    return Loaded(
        model_path=path,
        options=options,
        load_seconds=0.1,
        n_ctx=256,
        n_ctx_train=4096,
        architecture="<i>llama</i>",
        chat_format=chat_format,
        kv_caches=(),
        compute_buffers=(),
        warnings=(),
        system_info="",
        at=time.monotonic(),
        chat_template_notice=notice,
    )


def test_a_hostile_model_name_and_template_notice_are_shown_literally(qtbot, tmp_path, reliability):
    status = ChatStatus()
    qtbot.addWidget(status)
    status.resize(1100, 30)
    status.show()
    status.show_loaded(_loaded(f"/models/{NAME}.gguf", "chatml", NOTICE))
    for label in (status.model_label, status.template_label):
        assert label.textFormat() == Qt.TextFormat.PlainText
    assert status.model_label.text() == "<b>bold<img src=x.png>?[2J?evil"
    assert status.template_label.text() == "⚠ chatml template"
    tip = status.template_label.toolTip()
    assert "&lt;img src=x&gt;" in tip and "<img" not in tip
    assert "&lt;b&gt;bold" in status.model_label.toolTip()
    assert "&lt;i&gt;llama" in status.model_label.toolTip()
    shot = Path(os.environ.get("KVSTUDIO_SHOTS", tmp_path)) / "status_hostile_name.png"
    status.grab().save(str(shot))
    reliability.record(AREA, "GUI: labels showing a file's text, all plain text", 3)


def test_the_template_in_use_is_named(qtbot):
    status = ChatStatus()
    qtbot.addWidget(status)
    status.show_loaded(_loaded("/models/m.gguf", "gguf", ""))
    assert status.template_label.text() == "model's template"
    status.show_template("chatml", NOTICE)  # a TemplateFallback mid-chat
    assert status.template_label.text() == "⚠ chatml template"
    assert "Using the plain chatml template." in status.template_label.toolTip()
