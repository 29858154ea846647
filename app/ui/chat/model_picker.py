"""Model picker: a button with a menu of known models (starter, library, recent files),
an Open file… entry, load options and unload. Picking a model opens the load dialog
(app/ui/chat/load_dialog.py) for it."""

from __future__ import annotations

import logging
import os
from functools import partial

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QMenu,
    QToolButton,
    QWidget,
)

from app.models import starter
from app.platform.safe_text import safe_text
from app.state.settings import Settings
from app.ui.chat.status_bar import model_name
from app.ui.plain_text import plain_tooltip

log = logging.getLogger(__name__)

STARTER = "starter"
NAME_LIMIT = 80  # characters of a model's name in the menu and on the button


def _entry(name: str) -> str:
    """A model's name (the file's, the author's text) as a menu entry or button text: cleaned,
    cut, and with '&' doubled so Qt shows it instead of taking it for a shortcut mark."""
    return safe_text(name, NAME_LIMIT).replace("&", "&&")


def _library_models() -> list[tuple[str, str]]:
    """(label, ref) of the models app.models.library knows, when that module works."""
    try:
        # Guarded, so the picker opens even where the library cannot (no gguf package).
        from app.models.library import list_models
    except ImportError:
        return []
    try:
        return [(m.name, m.ref) for m in list_models(include_starter=False) if not m.error]
    except Exception:  # a broken cache folder must not break the menu
        log.warning("model library could not be listed", exc_info=True)
        return []


class ModelPicker(QToolButton):
    """Signals:
    model_chosen(str): a model picked (a .gguf path or 'starter'): its load dialog opens.
    options_requested(): the load dialog for the model loaded now (or the last one).
    unload_requested(): unload the model.
    """

    model_chosen = Signal(str)
    options_requested = Signal()
    unload_requested = Signal()

    def __init__(self, settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelPicker")
        self.settings = settings
        self.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.setText("Select a model to load  ▾")
        self._menu = QMenu(self)
        self._menu.aboutToShow.connect(self._fill_menu)
        self.setMenu(self._menu)

    def show_model(self, path: str | None, loading: bool = False) -> None:
        if path is None:
            self.setText("Select a model to load  ▾")
        else:
            self.setText(f"{'Loading ' if loading else ''}{_entry(model_name(path))}  ▾")
        self.setToolTip(plain_tooltip(path or ""))

    def _fill_menu(self) -> None:
        menu = self._menu
        menu.clear()
        if starter.is_available():
            menu.addAction(
                f"Starter model: {starter.NAME}", lambda: self.model_chosen.emit(STARTER)
            )
        library = _library_models()
        if library:
            menu.addSection("Library")
            for label, ref in library[:30]:
                menu.addAction(_entry(label), partial(self.model_chosen.emit, ref))
        recent = [p for p in self.settings.recent_models if p != STARTER and os.path.exists(p)]
        if recent:
            menu.addSection("Recent files")
            for path in recent:
                menu.addAction(_entry(model_name(path)), partial(self.model_chosen.emit, path))
        menu.addSeparator()
        menu.addAction("Open GGUF file…", self.open_file)
        menu.addAction("Load options…", lambda: self.options_requested.emit())
        menu.addAction("Unload model", lambda: self.unload_requested.emit())

    def open_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self,
            "Open a GGUF model",
            os.path.expanduser("~"),
            "GGUF models (*.gguf);;All files (*)",
        )
        if path:
            self.model_chosen.emit(path)
