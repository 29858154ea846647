"""The top of the Dashboard: its title, one plain sentence about the loaded model's KV cache
(app.kv.kv_summary), and a "Details" toggle (the info icon) that shows how memory is
measured and what the probe cannot see: caveats for the curious, the sentence for everyone."""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QStyle, QToolButton, QVBoxLayout, QWidget

from app.kv.kv_summary import NO_MODEL_SENTENCE
from app.platform.recording import Recording
from app.platform.safe_text import safe_text


def live_details(probe: object, engine_running: bool) -> str:
    """The details of live sampling (rich text): the probe (a MemoryProbe, or any object
    with some of its attributes), its device and its limits."""
    name, device = getattr(probe, "name", "probe"), getattr(probe, "device", "")
    limits, why = getattr(probe, "limits", ""), getattr(probe, "why", "")
    where = "the engine process" if engine_running else "no engine running yet"
    return (
        f"<b>Live</b>, sampled 10 times a second by <b>{name}</b> ({device}), "
        f"for {where}. {why} <i>{limits}</i>"
    )


def recording_details(rec: Recording) -> str:
    """The details of a shown recording (rich text); a recording is a file the user
    opened, so each of its words is cleaned and escaped."""
    meta = rec.metadata
    what = "Compare run" if meta.get("source") == "compare" else "Recording"
    model = html.escape(safe_text(Path(str(meta.get("model", ""))).name, 120))
    details = ", ".join(
        x
        for x in (
            model,
            f"n_ctx {meta['n_ctx']:,}" if "n_ctx" in meta else "",
            f"depth {meta['depth']:,}" if "depth" in meta else "",
        )
        if x
    )
    started, probe_name, device, limits = (
        html.escape(safe_text(v)) if v else ""
        for v in (rec.started_at, rec.probe_name, rec.device_name, rec.probe_limits)
    )
    return (
        f"<b>{what}</b> of {started or 'an unknown time'}: {details}. "
        f"Memory from <b>{probe_name or 'an unknown probe'}</b>"
        f"{' (' + device + ')' if device else ''}. "
        f"<i>{limits}</i>"
    )


class DashboardHeader(QWidget):
    """Signals:
    details_toggled(bool): the user showed (True) or hid the details.
    """

    details_toggled = Signal(bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel("Memory")
        self.title.setObjectName("dashboardTitle")  # its look: assets/style*.qss
        self.sentence = QLabel(NO_MODEL_SENTENCE)
        self.sentence.setObjectName("dashboardSentence")
        self.sentence.setWordWrap(True)
        self.sentence.setTextFormat(Qt.TextFormat.PlainText)  # file names may be in it one day
        self.details_button = QToolButton()
        self.details_button.setText("Details")
        self.details_button.setCheckable(True)
        # The style's info icon: the "ⓘ" character is missing from common fonts.
        self.details_button.setIcon(
            self.style().standardIcon(QStyle.StandardPixmap.SP_MessageBoxInformation)
        )
        self.details_button.setIconSize(QSize(16, 16))
        self.details_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.details_button.setToolTip("How memory is measured here, and what it cannot see")
        self.details = QLabel("")
        self.details.setWordWrap(True)
        self.details.setTextFormat(Qt.TextFormat.RichText)
        self.details.setObjectName("dashboardNote")
        self.details.hide()

        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.title)
        top.addStretch(1)
        self.buttons = QHBoxLayout()  # the page's buttons, beside Details
        top.addLayout(self.buttons)
        top.addWidget(self.details_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addLayout(top)
        layout.addWidget(self.sentence)
        layout.addWidget(self.details)
        self.details_button.toggled.connect(self._on_details_button_toggled)

    def set_sentence(self, text: str) -> None:
        self.sentence.setText(text)

    def set_details(self, html_text: str) -> None:
        self.details.setText(html_text)

    def _on_details_button_toggled(self, shown: bool) -> None:
        self.details.setVisible(shown)
        self.details_toggled.emit(shown)
