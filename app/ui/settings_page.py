"""The Settings page: the Hugging Face token, the data and model folders, the default load
settings, the theme, and the backend the engine runs.

Each part reuses what owns it: the token goes through core hub.tokens and the Models page's
TokenDialog (keyring or a 0600 file, shown masked, never logged); the folders are core
ModelFolders (settings_folders.py); the load defaults are the SettingsFile the chat page
loads from (settings_load_defaults.py); the theme is app/ui/theme.py; the backend line reads
the Backends page, which stays the one place to change or verify a backend.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication, QShowEvent
from PySide6.QtWidgets import (
    QButtonGroup,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QRadioButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.backends.store import BUILT_IN
from app.models.hub import tokens
from app.platform.safe_text import safe_text
from app.state.settings import THEMES, SettingsFile
from app.ui.backends_page import BackendsPage
from app.ui.models.token_dialog import TokenDialog
from app.ui.plain_text import plain_label
from app.ui.settings_folders import FoldersSection
from app.ui.settings_load_defaults import LoadDefaultsSection
from app.ui.theme import THEME_LABELS, ThemeController

log = logging.getLogger(__name__)


class TokenSection(QGroupBox):
    """Signals: token_changed(): a token was saved or removed (the Models page retries)."""

    token_changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Hugging Face token", parent)
        self.token_dialog: TokenDialog | None = None
        self.state_label = plain_label(QLabel())
        self.state_label.setObjectName("tokenState")
        self.state_label.setWordWrap(True)
        self.set_button = QPushButton()
        self.remove_button = QPushButton("Remove token")
        hint = QLabel(
            "Gated and private models need a token with read access. It is kept in the "
            "system keyring or a file only you can read, and never shown again."
        )
        hint.setObjectName("hint")
        hint.setWordWrap(True)
        buttons = QHBoxLayout()
        buttons.addWidget(self.state_label, 1)
        buttons.addWidget(self.set_button)
        buttons.addWidget(self.remove_button)
        layout = QVBoxLayout(self)
        layout.addLayout(buttons)
        layout.addWidget(hint)
        self.set_button.clicked.connect(self._on_set_clicked)
        self.remove_button.clicked.connect(self._on_remove_clicked)
        self.refresh()

    def refresh(self, said: str = "") -> None:
        masked = tokens.describe_token()
        from_env = any(
            (os.environ.get(n) or "").strip() for n in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
        )
        if masked is None:
            state = "No token is saved."
        elif from_env:
            state = f"A token ({masked}) comes from the HF_TOKEN environment variable."
        else:
            state = f"A token is saved ({masked})."
        self.state_label.setText(f"{said} {state}".strip())
        self.set_button.setText("Replace token…" if masked else "Set token…")
        self.remove_button.setVisible(masked is not None and not from_env)

    def _on_set_clicked(self) -> None:
        dialog = TokenDialog("", self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.accepted.connect(self._on_token_dialog_accepted)
        dialog.open()
        self.token_dialog = dialog

    def _on_token_dialog_accepted(self) -> None:
        self.refresh("Saved.")
        self.token_changed.emit()

    def _on_remove_clicked(self) -> None:
        try:
            removed = tokens.delete_token()
        except OSError as error:
            self.refresh(f"The token could not be removed: {error.strerror or error}.")
            return
        self.refresh("Removed." if removed else "")
        self.token_changed.emit()


class ThemeSection(QGroupBox):
    def __init__(self, theme: ThemeController, parent: QWidget | None = None) -> None:
        super().__init__("Theme", parent)
        self.theme = theme
        self.buttons: dict[str, QRadioButton] = {}
        self._group = QButtonGroup(self)
        row = QHBoxLayout()
        for choice in THEMES:
            button = QRadioButton(THEME_LABELS[choice])
            self.buttons[choice] = button
            self._group.addButton(button)
            row.addWidget(button)
            button.toggled.connect(
                lambda on, choice=choice: self._on_choice_toggled(choice) if on else None
            )
        row.addStretch(1)
        self.system_label = QLabel()
        self.system_label.setObjectName("hint")
        self.system_label.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.system_label)
        # A bound method, not a lambda: Qt drops it with this widget (the theme outlives it).
        theme.scheme_shown.connect(self._on_scheme_shown)
        self.refresh()

    def _on_scheme_shown(self, _scheme: object) -> None:
        self.refresh()

    def refresh(self) -> None:
        button = self.buttons.get(self.theme.choice)
        if button is not None and not button.isChecked():
            button.setChecked(True)
        scheme = QGuiApplication.styleHints().colorScheme()
        said = {Qt.ColorScheme.Dark: "dark", Qt.ColorScheme.Light: "light"}.get(scheme)
        self.system_label.setText(
            f"The system's scheme is {said}."
            if said
            else "The system does not say whether it is light or dark: following it shows light."
        )

    def _on_choice_toggled(self, choice: str) -> None:
        if choice != self.theme.choice:
            self.theme.choose(choice)


class BackendSection(QGroupBox):
    """One line about the backend the engine runs; the Backends page does the rest.

    Signals: backends_page_requested(): the user asked for the Backends page."""

    backends_page_requested = Signal()

    def __init__(self, backends: BackendsPage, parent: QWidget | None = None) -> None:
        super().__init__("Backend", parent)
        self.backends = backends
        self.summary = plain_label(QLabel())  # a package's manifest is its author's text
        self.summary.setObjectName("backendSummary")
        self.summary.setWordWrap(True)
        self.open_button = QPushButton("Backends…")
        row = QHBoxLayout(self)
        row.addWidget(self.summary, 1)
        row.addWidget(self.open_button)
        self.open_button.clicked.connect(self.backends_page_requested)
        backends.task_finished.connect(self._on_backend_task_finished)  # bound: dropped with us
        self.refresh()

    def _on_backend_task_finished(self, _text: str) -> None:
        self.refresh()

    def refresh(self) -> None:
        backend, notice = self.backends.store.for_engine()
        manifest = backend.manifest
        if backend.name == BUILT_IN or manifest is None:
            variant = "llama-cpp-python's own build"
        else:
            variant = f"{manifest.name}: {manifest.summary}"
        result = self.backends.last_verify
        if result is None or result.backend.name != backend.name:
            verdict = "not verified in this session"
        elif result.ok:
            verdict = "verified"
        else:
            verdict = "verify found a problem: " + "; ".join(result.problems)
        text = f"The engine runs {backend.name} ({variant}); {verdict}."
        self.summary.setText(safe_text(text + (f" {notice}" if notice else ""), 600))


class SettingsPage(QWidget):
    """Signals:
    token_changed(): a Hugging Face token was saved or removed.
    model_folders_changed(): a model folder was added or removed.
    backends_page_requested(): the user asked for the Backends page.
    """

    token_changed = Signal()
    model_folders_changed = Signal()
    backends_page_requested = Signal()

    def __init__(
        self,
        settings: SettingsFile,
        data_folder: Path,
        theme: ThemeController,
        backends: BackendsPage,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.token = TokenSection()
        self.folders = FoldersSection(data_folder)
        self.load_defaults = LoadDefaultsSection(settings)
        self.theme = ThemeSection(theme)
        self.backend = BackendSection(backends)
        title = QLabel("Settings")
        title.setObjectName("pageTitle")
        title.setStyleSheet("font-size: 18px; font-weight: 600;")

        # Two columns, so the page fits a 1024x640 window without scrolling; the scroll area
        # is for windows smaller than that.
        left = QVBoxLayout()
        left.addWidget(self.token)
        left.addWidget(self.folders, 1)
        right = QVBoxLayout()
        right.addWidget(self.load_defaults)
        right.addWidget(self.theme)
        right.addWidget(self.backend)
        right.addStretch(1)
        columns = QHBoxLayout()
        columns.setSpacing(16)
        columns.addLayout(left, 1)
        columns.addLayout(right, 1)
        body = QWidget()
        body.setObjectName("settingsBody")
        column = QVBoxLayout(body)
        column.setContentsMargins(16, 16, 16, 16)
        column.addWidget(title)
        column.addLayout(columns, 1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setWidget(body)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(scroll)

        self.token.token_changed.connect(self.token_changed)
        self.folders.model_folders_changed.connect(self.model_folders_changed)
        self.backend.backends_page_requested.connect(self.backends_page_requested)

    def showEvent(self, event: QShowEvent) -> None:
        self.token.refresh()
        self.backend.refresh()
        super().showEvent(event)
