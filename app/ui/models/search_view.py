"""Search the Hub for GGUF repositories: a query box, a sort choice, "Chat models only", a
results table; and, until the user searches (or asks for it), the Recommended list of small
chat models with their fit for this machine, which needs no network.

The search and the fit run on a TaskRunner thread; the view only shows results or one
sentence when it fails (offline, unreachable, HTTP error).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.kv.fit import FitEstimate
from app.models.hub import RepoSummary
from app.models.hub.curated_models import CURATED_MODELS, CuratedModel
from app.platform import units as fmt
from app.services.tasks import TaskRunner, user_message
from app.state.settings import DEFAULT_CONTEXT
from app.ui.models.flat_table import ListTableModel, row_table
from app.ui.models.recommended import RecommendedModel, recommended_table
from app.ui.plain_text import plain_label

SearchFn = Callable[[str, str, bool], list[RepoSummary]]  # (query, sort, chat_only)
CuratedFitFn = Callable[[CuratedModel, int], FitEstimate]  # (model, n_ctx)

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
RECOMMENDED_HINT = (
    "Recommended: small chat models to start with, checked against this computer's memory "
    "at {n_ctx:,} tokens. Select one to see its files; Search finds more."
)


class SearchResultsModel(ListTableModel[RepoSummary]):
    """Rows of RepoSummary (repo_id, author, downloads, likes, last_modified)."""

    HEADERS = ("Model", "Author", "Downloads", "Likes", "Updated")

    def cell(self, row: int, col: int, role: int) -> object:
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
    """Signals: repo_activated(str repo_id) - the user picked a result or a recommended model."""

    repo_activated = Signal(str)

    def __init__(
        self,
        search_fn: SearchFn,
        runner: TaskRunner,
        curated_fit_fn: CuratedFitFn | None = None,
        default_context: int = DEFAULT_CONTEXT,
        parent: QWidget | None = None,
    ) -> None:
        """`search_fn(query, sort, chat_only)`: the Hub search; `curated_fit_fn(model, n_ctx)`:
        a recommended model's fit for this machine (None: the list shows no verdicts), at
        `default_context` tokens (the default load setting, as the repo view's)."""
        super().__init__(parent)
        self._n_ctx = default_context
        self._search_fn = search_fn
        self._curated_fit_fn = curated_fit_fn
        self._runner = runner
        self._fits_asked = False

        self.query_edit = QLineEdit(placeholderText="Search GGUF models on Hugging Face…")
        self.query_edit.setClearButtonEnabled(True)
        self.sort_combo = QComboBox()
        for label, key in SORTS:
            self.sort_combo.addItem(label, key)
        self.search_button = QPushButton("Search")
        self.recommended_button = QPushButton("Recommended")
        self.recommended_button.setToolTip("Small chat models to start with (no search needed)")
        self.chat_only_box = QCheckBox("Chat models only")
        self.chat_only_box.setToolTip(
            "Only instruct / chat models: tagged conversational on the Hub, or named "
            "Instruct, Chat or -it"
        )
        # The Hub is asked nothing until the user searches (no network call the user did not
        # ask for, issue 10); the recommended list needs none.
        self.status_label = plain_label(QLabel())  # quotes the query and errors
        self.status_label.setWordWrap(True)
        self.status_label.setObjectName("searchStatus")

        self.results = SearchResultsModel(self)
        self.table = row_table(self.results)
        self.table.setAlternatingRowColors(True)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for col in range(1, len(SearchResultsModel.HEADERS)):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        self.recommended = RecommendedModel(self)
        self.recommended_table = recommended_table(self.recommended)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.recommended_table)
        self.stack.addWidget(self.table)

        # Two rows: the query keeps a usable width when the pane is narrow (1024 px windows).
        row = QHBoxLayout()
        row.addWidget(self.query_edit, 1)
        row.addWidget(self.search_button)
        options = QHBoxLayout()
        options.addWidget(self.recommended_button)
        options.addWidget(self.chat_only_box)
        options.addStretch(1)
        options.addWidget(self.sort_combo)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 8, 0, 0)
        layout.addLayout(row)
        layout.addLayout(options)
        layout.addWidget(self.status_label)
        layout.addWidget(self.stack, 1)

        self.query_edit.returnPressed.connect(self.search)
        self.query_edit.textChanged.connect(self._on_query_changed)
        self.search_button.clicked.connect(self.search)
        self.recommended_button.clicked.connect(self.show_recommended)
        self.sort_combo.currentIndexChanged.connect(self._on_options_changed)
        self.chat_only_box.toggled.connect(self._on_options_changed)
        for table in (self.table, self.recommended_table):
            table.selectionModel().currentRowChanged.connect(self._on_row_changed)
            table.activated.connect(self._on_row_activated)
        self.show_recommended()

    def recommended_hint(self) -> str:
        return RECOMMENDED_HINT.format(n_ctx=self._n_ctx)

    def showing_recommended(self) -> bool:
        return self.stack.currentWidget() is self.recommended_table

    def show_recommended(self) -> None:
        """Show the recommended chat models, their fit estimated once (off the GUI thread)."""
        self.stack.setCurrentWidget(self.recommended_table)
        self.status_label.setText(self.recommended_hint())
        if self._curated_fit_fn is not None and not self._fits_asked:
            self._fits_asked = True
            self._runner.submit("recommended-fit", self._fit_all, on_done=self.recommended.set_fits)

    def search(self) -> None:
        """Start a search with the box's text and the chosen sort (off the GUI thread)."""
        query = self.query_edit.text().strip()
        sort = self.sort_combo.currentData()
        chat_only = self.chat_only_box.isChecked()
        self.stack.setCurrentWidget(self.table)
        what = "chat models" if chat_only else ""
        self.status_label.setText(
            f"Searching{' for ' + what if what else ''}…"
            if not query
            else f"Searching {what + ' ' if what else ''}for “{query}”…"
        )
        self._runner.submit(
            "search",
            self._search_fn,
            query,
            sort,
            chat_only,
            on_done=self._on_search_done,
            on_error=self._on_search_failed,
        )

    def _fit_all(self) -> dict[str, FitEstimate | str]:
        """Each recommended model's fit, or why it has none (runs on the pool)."""
        assert self._curated_fit_fn is not None
        fits: dict[str, FitEstimate | str] = {}
        for model in CURATED_MODELS:
            try:
                fits[model.repo_id] = self._curated_fit_fn(model, self._n_ctx)
            except Exception as error:  # noqa: BLE001 - a probe that fails costs one cell
                fits[model.repo_id] = user_message(error)
        return fits

    def _on_query_changed(self, text: str) -> None:
        if not text.strip() and not self.showing_recommended() and not self.results.rowCount():
            self.show_recommended()

    def _on_options_changed(self, *_args: object) -> None:
        if not self.showing_recommended():
            self.search()

    def _on_search_done(self, rows: Sequence[RepoSummary]) -> None:
        self.results.set_rows(rows)
        n = len(rows)
        chat = self.chat_only_box.isChecked()
        kind = "chat model" if chat else "model"
        self.status_label.setText(
            f"No {'chat' if chat else 'GGUF'} models matched."
            if n == 0
            else f"{n} {kind}{'s' if n != 1 else ''} found."
        )

    def _on_search_failed(self, message: str, _error: BaseException) -> None:
        self.results.set_rows([])
        self.status_label.setText(message)

    def _on_row_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid():
            self._activate(current)

    def _on_row_activated(self, index: QModelIndex) -> None:
        if index.isValid():
            self._activate(index)

    def _activate(self, index: QModelIndex) -> None:
        repo_id = index.siblingAtColumn(0).data(Qt.ItemDataRole.UserRole)
        if isinstance(repo_id, str):
            self.repo_activated.emit(repo_id)
