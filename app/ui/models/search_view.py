"""Search the Hub for GGUF repositories: a query box, a sort choice, a results table.

The search itself runs on a TaskRunner thread; the view only shows results or one
sentence when it fails (offline, HTTP error).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.core import units as fmt
from app.core.hub import RepoSummary
from app.services.tasks import TaskRunner
from app.ui.models.flat_table import ListTableModel, row_table
from app.ui.plain_text import plain_label

# (label shown, sort key passed to the search function)
SORTS = (
    ("Most downloads", "downloads"),
    ("Most likes", "likes"),
    ("Recently updated", "last_modified"),
)
IDLE_HINT = (
    "Type a name and press Search, or press Search with the box empty for the most downloaded "
    "GGUF models on Hugging Face."
)


class SearchResultsModel(ListTableModel[RepoSummary]):
    """Rows of RepoSummary (repo_id, author, downloads, likes, last_modified)."""

    HEADERS = ("Model", "Author", "Downloads", "Likes", "Updated")

    def cell(self, row: int, col: int, role: int) -> Any:
        repo = self._rows[row]
        if role == Qt.ItemDataRole.DisplayRole:
            name = repo.repo_id.split("/", 1)[-1]
            return (
                name,
                repo.author or repo.repo_id.split("/", 1)[0],
                fmt.count(repo.downloads),
                fmt.count(repo.likes),
                fmt.when(repo.last_modified),
            )[col]
        if role == Qt.ItemDataRole.ToolTipRole:
            return repo.repo_id
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (2, 3):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.UserRole:
            return repo.repo_id
        return None


class SearchView(QWidget):
    """Signals: repo_activated(str repo_id) - the user picked a result."""

    repo_activated = Signal(str)

    def __init__(
        self,
        search_fn: Callable[[str, str], list[RepoSummary]],
        runner: TaskRunner,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._search_fn = search_fn
        self._runner = runner

        self.query_edit = QLineEdit(placeholderText="Search GGUF models on Hugging Face…")
        self.query_edit.setClearButtonEnabled(True)
        self.sort_combo = QComboBox()
        for label, key in SORTS:
            self.sort_combo.addItem(label, key)
        self.search_button = QPushButton("Search")
        # The Hub is asked nothing until the user searches (no network call the user did not
        # ask for, issue 10), so the table starts empty with this line instead of a front page.
        self.status_label = plain_label(QLabel(IDLE_HINT))  # quotes the query and errors
        self.status_label.setWordWrap(True)
        self.status_label.setObjectName("searchStatus")

        self.results = SearchResultsModel(self)
        self.table = row_table(self.results)
        self.table.setAlternatingRowColors(True)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for col in range(1, len(SearchResultsModel.HEADERS)):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)

        row = QHBoxLayout()
        row.addWidget(self.query_edit, 1)
        row.addWidget(self.sort_combo)
        row.addWidget(self.search_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 8, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.status_label)
        layout.addWidget(self.table, 1)

        self.query_edit.returnPressed.connect(self.search)
        self.search_button.clicked.connect(self.search)
        self.sort_combo.currentIndexChanged.connect(self._on_sort_changed)
        self.table.selectionModel().currentRowChanged.connect(self._on_row_changed)
        self.table.activated.connect(self._on_row_activated)

    def search(self) -> None:
        """Start a search with the box's text and the chosen sort (off the GUI thread)."""
        query = self.query_edit.text().strip()
        sort = self.sort_combo.currentData()
        self.status_label.setText("Searching…" if not query else f"Searching for “{query}”…")
        self._runner.submit(
            "search",
            self._search_fn,
            query,
            sort,
            on_done=self._on_search_done,
            on_error=self._on_search_failed,
        )

    def _on_sort_changed(self, _index: int) -> None:
        if self.results.rowCount() or self.query_edit.text().strip():
            self.search()

    def _on_search_done(self, rows: Sequence[RepoSummary]) -> None:
        self.results.set_rows(rows)
        n = len(rows)
        self.status_label.setText(
            "No GGUF models matched." if n == 0 else f"{n} model{'s' if n != 1 else ''} found."
        )

    def _on_search_failed(self, message: str, _error: BaseException) -> None:
        self.results.set_rows([])
        self.status_label.setText(message)

    def _on_row_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid():
            self.repo_activated.emit(self.results.row_at(current.row()).repo_id)

    def _on_row_activated(self, index: QModelIndex) -> None:
        if index.isValid():
            self.repo_activated.emit(self.results.row_at(index.row()).repo_id)
