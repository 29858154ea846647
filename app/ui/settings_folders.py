"""The Settings page's folders: the data folder (with Open folder) and the model folders, the
one list (core ModelFolders) that My models, the chat's model picker and `kvstudio ls` read."""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QShowEvent
from PySide6.QtWidgets import (
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.models.hub_env import hub_cache_dir
from app.models.model_folders import FolderChoices, ModelFolders
from app.ui.plain_text import plain_label, plain_tooltip

PathRole = Qt.ItemDataRole.UserRole


def folder_rows(choices: FolderChoices) -> list[tuple[Path, str]]:
    """Each listed folder once, with what it is in the user's words."""
    rows: dict[Path, str] = {}
    for folder in choices.folders:
        rows[folder] = "your folder"
    for folder in choices.download_folders:
        rows.setdefault(folder, "downloads")
    if choices.download_to in rows:
        rows[choices.download_to] += ", new downloads go here"
    return list(rows.items())


class FoldersSection(QGroupBox):
    """Signals: model_folders_changed(): a folder was added or removed (My models re-reads)."""

    model_folders_changed = Signal()

    def __init__(self, data_folder: Path, parent: QWidget | None = None) -> None:
        super().__init__("Folders", parent)
        self.data_folder = data_folder
        self.model_folders = ModelFolders(data_folder)
        # A read-only line: a long path scrolls inside it instead of widening the page.
        self.data_label = QLineEdit(str(data_folder))
        self.data_label.setReadOnly(True)
        self.data_label.setCursorPosition(0)
        self.data_label.setToolTip(
            "Conversations, settings, logs and backends are kept here (KVSTUDIO_DATA_DIR "
            "chooses another)."
        )
        self.open_data_button = QPushButton("Open folder")
        self.folder_list = QListWidget()
        self.folder_list.setObjectName("modelFolderList")
        self.folder_list.setMinimumHeight(64)
        self.add_button = QPushButton("Add folder…")
        self.remove_button = QPushButton("Remove")
        self.remove_button.setToolTip("Stop listing its models; no file is deleted")
        self.message = plain_label(QLabel())  # quotes folder names
        self.message.setWordWrap(True)
        hint = QLabel(
            "My models, the chat's model picker and <code>kvstudio ls</code> list the GGUF files "
            f"in these folders and in the Hugging Face cache ({html.escape(str(hub_cache_dir()))})."
        )
        hint.setObjectName("hint")
        hint.setWordWrap(True)

        data_row = QHBoxLayout()
        data_row.addWidget(QLabel("Data folder:"))
        data_row.addWidget(self.data_label, 1)
        data_row.addWidget(self.open_data_button)
        buttons = QHBoxLayout()
        buttons.addWidget(self.message, 1)
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.remove_button)
        layout = QVBoxLayout(self)
        layout.addLayout(data_row)
        layout.addWidget(QLabel("Model folders:"))
        layout.addWidget(self.folder_list, 1)
        layout.addLayout(buttons)
        layout.addWidget(hint)

        self.open_data_button.clicked.connect(self._on_open_data_clicked)
        self.add_button.clicked.connect(self._on_add_clicked)
        self.remove_button.clicked.connect(self._on_remove_clicked)
        self.folder_list.currentRowChanged.connect(lambda _r: self._update_buttons())
        self.refresh()

    def refresh(self) -> None:
        """Re-read the list (My models' Add folder or a download may have changed it)."""
        current = self.selected_folder()
        self.folder_list.clear()
        for folder, what in folder_rows(self.model_folders.read()):
            item = QListWidgetItem(f"{folder}  ({what})")
            item.setData(PathRole, str(folder))
            item.setToolTip(plain_tooltip(str(folder)))
            self.folder_list.addItem(item)
            if folder == current:
                self.folder_list.setCurrentItem(item)
        if self.folder_list.count() == 0:
            self.message.setText("No model folders yet.")
        self._update_buttons()

    def listed_folders(self) -> list[Path]:
        return [
            Path(self.folder_list.item(row).data(PathRole))
            for row in range(self.folder_list.count())
        ]

    def selected_folder(self) -> Path | None:
        item = self.folder_list.currentItem()
        return Path(item.data(PathRole)) if item is not None else None

    def add_folder(self, folder: Path) -> None:
        """Add a folder of the user's GGUF files (what Add folder… does once one is chosen)."""
        if not folder.is_dir():
            self.message.setText(f"{folder} is not a folder that exists here.")
            return
        if folder.expanduser().resolve() in self.model_folders.read().folders:
            self.message.setText(f"{folder} is already listed.")
            return
        try:
            self.model_folders.add_folder(folder)
        except OSError as error:
            self.message.setText(f"The folder list could not be saved: {error.strerror or error}.")
            return
        self.refresh()
        self.message.setText(f"Added {folder}; My models lists its GGUF files.")
        self.model_folders_changed.emit()

    def remove_folder(self, folder: Path) -> None:
        moved = self.model_folders.read().download_to == folder
        try:
            self.model_folders.remove_folder(folder)
        except OSError as error:
            self.message.setText(f"The folder list could not be saved: {error.strerror or error}.")
            return
        self.refresh()
        self.message.setText(
            f"Removed {folder} from the list; its files are still there."
            + (" New downloads go to the Hugging Face cache." if moved else "")
        )
        self.model_folders_changed.emit()

    def showEvent(self, event: QShowEvent) -> None:
        self.refresh()
        super().showEvent(event)

    def _on_open_data_clicked(self) -> None:
        self.data_folder.mkdir(parents=True, exist_ok=True)
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.data_folder)))

    def _on_add_clicked(self) -> None:
        chosen = QFileDialog.getExistingDirectory(self, "Add a folder with GGUF models")
        if chosen:
            self.add_folder(Path(chosen))

    def _on_remove_clicked(self) -> None:
        folder = self.selected_folder()
        if folder is not None:
            self.remove_folder(folder)

    def _update_buttons(self) -> None:
        self.remove_button.setEnabled(self.selected_folder() is not None)
