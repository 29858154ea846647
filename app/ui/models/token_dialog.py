"""Paste a Hugging Face access token for gated or private repos.

The token goes straight to the core tokens module (the system keyring, or a 0600 file where
huggingface_hub keeps it); the dialog shows only a masked form of a saved token, never the token.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from app.models.hub import tokens
from app.platform.errors import AppError
from app.ui.tones import ERROR, set_tone

TOKEN_PAGE = "https://huggingface.co/settings/tokens"


class TokenDialog(QDialog):
    def __init__(
        self,
        reason: str = "",
        parent: QWidget | None = None,
        save_fn: Callable[[str], Path | None] = tokens.save_token,
        describe_fn: Callable[[], str | None] = tokens.describe_token,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Hugging Face access token")
        self._save_fn = save_fn
        self.saved_to: Path | None = None

        intro = QLabel(
            (f"{reason}<br><br>" if reason else "")
            + "Gated and private models need a Hugging Face access token with read access. "
            f'Create one at <a href="{TOKEN_PAGE}">{TOKEN_PAGE}</a>, accept the model\'s terms '
            "on its Hub page, and paste the token here. It is stored on this computer, readable "
            "only by you, and never shown again."
        )
        intro.setWordWrap(True)
        intro.setOpenExternalLinks(True)
        intro.setTextFormat(Qt.TextFormat.RichText)
        current = describe_fn()
        self.current_label = QLabel(
            f"A token is saved ({current}); a new one replaces it."
            if current
            else "No token is saved yet."
        )
        self.current_label.setObjectName("hint")  # the look's hint colour, 4.5:1 in both
        self.token_edit = QLineEdit()
        self.token_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.token_edit.setPlaceholderText("hf_…")
        self.error_label = QLabel()
        set_tone(self.error_label, ERROR)
        self.error_label.setWordWrap(True)
        self.error_label.hide()
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self._on_save_clicked)
        self.buttons.rejected.connect(self.reject)

        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.current_label)
        layout.addWidget(self.token_edit)
        layout.addWidget(self.error_label)
        layout.addWidget(self.buttons)
        self.resize(520, self.sizeHint().height())

    def _on_save_clicked(self) -> None:
        try:
            self.saved_to = self._save_fn(self.token_edit.text())
        except AppError as error:
            self.error_label.setText(str(error))
            self.error_label.show()
            return
        except OSError as error:
            self.error_label.setText(f"The token could not be saved: {error.strerror or error}.")
            self.error_label.show()
            return
        self.token_edit.clear()  # do not keep the secret in the widget
        self.accept()
