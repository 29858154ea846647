"""One Hub repo: its GGUF files grouped by quantization, sizes, and a fit verdict per KV mode.

Listing the repo and reading each file's header (a range request) run on the TaskRunner;
the tree fills in as answers arrive, and a new context length re-estimates every file.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from PySide6.QtCore import QModelIndex, Qt, QTimer, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from app.kv.fit import MARGIN, UNSUPPORTED, FitEstimate
from app.kv.fit_estimator import FitEstimator
from app.load.fit_speed import Bandwidth, bandwidth_for, recommended_file
from app.models.hub import GgufEntry, RepoFiles
from app.platform import units as fmt
from app.platform.errors import GatedRepoError
from app.platform.safe_text import safe_text
from app.services.tasks import TaskRunner
from app.state.settings import DEFAULT_CONTEXT
from app.ui.models.elided_label import ElidedLabel, KeepEndDelegate
from app.ui.models.repo_files_model import (
    ENTRY_ROLE,
    HEADERS,
    MODE_COLUMN0,
    SIZE_COLUMN,
    SPEED_COLUMN,
    RepoFilesModel,
    quant_tail,
)
from app.ui.models.verdicts import VerdictDelegate, budget_text, paint_verdict
from app.ui.plain_text import plain_label
from app.ui.tones import WARNING, set_tone

NARROW_WIDTH = 560  # the repo view's width below which the Size column gives way to the name


class RepoView(QWidget):
    """Signals: download_requested(object GgufEntry), token_requested()."""

    download_requested = Signal(object)
    token_requested = Signal()

    def __init__(
        self,
        list_fn: Callable[[str], RepoFiles],
        fit_fn: FitEstimator,
        runner: TaskRunner,
        parent: QWidget | None = None,
        default_context: int = DEFAULT_CONTEXT,
    ) -> None:
        """`default_context`: the context the estimates start at, the default load setting
        (the chat's load dialog starts there too, so both say the same about a model)."""
        super().__init__(parent)
        self._list_fn = list_fn
        self._fit_fn = fit_fn
        self._runner = runner
        self._repo_id: str | None = None
        self._fits: dict[str, FitEstimate] = {}
        # What a real decode of the loaded model showed (ModelsPage sets it): speeds rest on it.
        self.measured_bandwidth: Bandwidth | None = None

        self._build_header(default_context)
        self._build_gate()
        self._build_tree()
        self._build_detail()
        self._build_download_row()
        self._lay_out()
        self._connect()

    # ---- building ----------------------------------------------------------------------

    def _build_header(self, default_context: int) -> None:
        """The repo's name, the context the estimates are for, and the status lines."""
        # Elided: a long repo id held the window at 1142 px or more (issue 12).
        self.title_label = ElidedLabel("Pick a model on the left to see its files.")
        self.title_label.setObjectName("repoTitle")
        self.title_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.context_spin = QSpinBox()
        self.context_spin.setRange(256, 1 << 21)
        self.context_spin.setSingleStep(1024)
        self.context_spin.setValue(default_context)
        self.context_spin.setSuffix(" tokens")
        self.context_spin.setToolTip("The context length the fit estimate is for")
        self.status_label = plain_label(QLabel())  # repo and file names are the Hub's text
        self.status_label.setWordWrap(True)
        self.budget_label = QLabel()  # one long sentence: wrapped, or it sets the window's width
        self.budget_label.setWordWrap(True)
        self.budget_label.setObjectName("hint")  # the sheets' hint colour: 4.5:1 in both looks

    def _build_gate(self) -> None:
        """The notice for a gated repo, with its button to add a token (hidden until then)."""
        self.gate_label = plain_label(QLabel())
        self.gate_label.setWordWrap(True)
        self.gate_button = QPushButton("Add token…")
        self.gate_box = QFrame()
        gate_row = QHBoxLayout(self.gate_box)
        gate_row.setContentsMargins(8, 4, 8, 4)
        gate_row.addWidget(self.gate_label, 1)
        gate_row.addWidget(self.gate_button)
        set_tone(self.gate_box, WARNING)  # the look's warning box
        self.gate_box.hide()

    def _build_tree(self) -> None:
        """The files under a row per quantization, a verdict per KV mode beside each."""
        self.model = RepoFilesModel(self)
        self._entries = self.model.entries  # first_file -> (entry, its row)
        self.tree = QTreeView()
        self.tree.setModel(self.model)
        self.tree.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.tree.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.tree.setAlternatingRowColors(True)
        self.tree.setUniformRowHeights(True)
        self.tree.setIndentation(10)  # files sit one level in; the name needs the width more
        # A narrow window elides a file's name before its quantization, never the quantization.
        self.tree.setItemDelegateForColumn(0, KeepEndDelegate(quant_tail, self.tree))
        for col in range(MODE_COLUMN0, SPEED_COLUMN):
            self.tree.setItemDelegateForColumn(col, VerdictDelegate(self.tree))
        header = self.tree.header()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for col in range(1, len(HEADERS)):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        # The width left over goes to the file's name alone: Speed, the last column, took
        # half of it (at 1024 px the name was cut to 'ge…_M').
        header.setStretchLastSection(False)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        # Narrow (a 1024 px window): the file's name keeps the Size column's width too; its
        # size is in the name's tooltip and in the line under the list once it is picked.
        self.tree.setColumnHidden(SIZE_COLUMN, self.width() < NARROW_WIDTH)

    def _build_detail(self) -> None:
        """The picked file's figures per KV mode (hidden until it has an estimate)."""
        self.detail = QTableWidget(0, 5)
        self.detail.setHorizontalHeaderLabels(
            ["KV mode", "KV cache", "Total needed", "Verdict", "Max context"]
        )
        self.detail.verticalHeader().hide()
        self.detail.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.detail.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.detail.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.detail.setItemDelegateForColumn(3, VerdictDelegate(self.detail))  # the look's shades
        self.detail.setMaximumHeight(130)
        self.detail.hide()  # until a file with an estimate is picked
        self.detail_label = plain_label(QLabel())
        self.detail_label.setWordWrap(True)

    def _build_download_row(self) -> None:
        self.destination_combo = QComboBox()  # filled by the page: HF cache or a folder
        # A long folder path is elided in the combo rather than widening the window.
        self.destination_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.destination_combo.setMinimumContentsLength(12)
        self.destination_combo.setToolTip("Where downloads are saved")
        self.download_button = QPushButton("Download")
        self.download_button.setObjectName("primaryButton")
        self.download_button.setEnabled(False)

    def _lay_out(self) -> None:
        top = QHBoxLayout()
        top.addWidget(self.title_label, 1)
        top.addWidget(QLabel("Context"))
        top.addWidget(self.context_spin)
        bottom = QHBoxLayout()
        bottom.addStretch(1)
        bottom.addWidget(QLabel("Save to"))
        bottom.addWidget(self.destination_combo)
        bottom.addWidget(self.download_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 8, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.budget_label)
        layout.addWidget(self.gate_box)
        layout.addWidget(self.status_label)
        layout.addWidget(self.tree, 1)
        layout.addLayout(bottom)
        layout.addWidget(self.detail_label)
        layout.addWidget(self.detail)

    def _connect(self) -> None:
        # Typing 32768 should not start five estimates; wait until the user pauses.
        self._refit_timer = QTimer(self, singleShot=True, interval=300)
        self._refit_timer.timeout.connect(self._estimate_all)
        self.context_spin.valueChanged.connect(lambda _v: self._refit_timer.start())
        self.tree.selectionModel().currentRowChanged.connect(self._on_tree_current_changed)
        self.tree.doubleClicked.connect(self._on_tree_double_clicked)
        self.download_button.clicked.connect(self._on_download_clicked)
        self.gate_button.clicked.connect(self.token_requested)

    # ---- public ------------------------------------------------------------------------

    @property
    def repo_id(self) -> str | None:
        return self._repo_id

    def open_repo(self, repo_id: str) -> None:
        """List the repo's GGUF files (off the GUI thread) and estimate each one's fit."""
        self._repo_id = repo_id
        self.title_label.setText(repo_id)
        self.status_label.setText("Reading the repository's file list…")
        self.gate_box.hide()
        self._clear()
        self._runner.submit(
            "repo",
            self._list_fn,
            repo_id,
            on_done=self._on_listed,
            on_error=self._on_list_failed,
        )

    def reload(self) -> None:
        if self._repo_id:
            self.open_repo(self._repo_id)

    def entry_names(self) -> list[str]:
        return list(self._entries)

    def fit_for(self, first_file: str) -> FitEstimate | None:
        return self._fits.get(first_file)

    def select_entry(self, first_file: str) -> None:
        _entry, row = self._entries[first_file]
        self.tree.setCurrentIndex(row.index())

    # ---- listing -----------------------------------------------------------------------

    def _clear(self) -> None:
        self.model.clear_files()
        self._fits.clear()
        self.detail.setRowCount(0)
        self.detail.hide()
        self.detail_label.clear()
        self.download_button.setEnabled(False)

    def _on_listed(self, repo: RepoFiles) -> None:
        if repo.repo_id != self._repo_id:
            return
        self._clear()
        self._fit_fn.set_entries(repo.entries)
        groups = repo.by_quantization()
        for quant, entries in groups.items():
            self.model.add_group(quant, entries)
            if len(entries) == 1:  # no total size to show: its label (and mark) takes the row
                self.tree.setFirstColumnSpanned(self.model.rowCount() - 1, QModelIndex(), True)
        self.tree.expandAll()
        n = len(repo.entries)
        if n == 0:
            self.status_label.setText("This repository has no GGUF model files.")
        else:
            quants = len(groups)
            self.status_label.setText(
                f"{n} GGUF model{'s' if n != 1 else ''} "
                f"in {quants} quantization{'s' if quants != 1 else ''}."
            )
        self._estimate_all()

    def _on_list_failed(self, message: str, error: BaseException) -> None:
        self.status_label.setText(message)
        if isinstance(error, GatedRepoError):
            self._show_gate(message)

    def _show_gate(self, message: str) -> None:
        self.gate_label.setText(message)
        self.gate_box.show()

    # ---- fit estimates -----------------------------------------------------------------

    def _estimate_all(self) -> None:
        n_ctx = self.context_spin.value()
        for first_file, (entry, _row) in self._entries.items():
            self.model.show_fit(first_file, None, "estimating…")
            self._runner.submit(
                f"fit:{self._repo_id}:{first_file}",
                self._fit_fn,
                entry,
                n_ctx,
                on_done=partial(self._on_fit_done, self._repo_id, first_file),
                on_error=partial(self._on_fit_failed, self._repo_id, first_file),
            )

    def _on_fit_done(self, repo_id: str | None, first_file: str, fit: FitEstimate) -> None:
        if repo_id != self._repo_id or first_file not in self._entries:
            return
        self._fits[first_file] = fit
        bandwidth = bandwidth_for(fit, self.measured_bandwidth)
        self.model.show_fit(first_file, fit, bandwidth=bandwidth)
        self._mark_recommended()
        self.budget_label.setText(
            f"Estimates for {fit.n_ctx:,} tokens of context against {fmt.size(fit.budget.bytes)} "
            f"{budget_text(fit.budget)} (fits: within {100 - round(MARGIN * 100)}% of it; "
            f"tight: up to all of it). Speeds at {bandwidth.describe()}."
        )
        current = self._current_entry()
        if current is not None and current.first_file == first_file:
            self._show_detail(current)

    def set_measured_bandwidth(self, bandwidth: Bandwidth | None) -> None:
        """Speeds from now on rest on `bandwidth` (a real decode's); the shown ones again."""
        self.measured_bandwidth = bandwidth
        for first_file, fit in list(self._fits.items()):
            self._on_fit_done(self._repo_id, first_file, fit)

    def _mark_recommended(self) -> None:
        candidates = [
            (name, self._entries[name][0].total_size, fit)
            for name, fit in self._fits.items()
            if name in self._entries
        ]
        self.model.mark_recommended(recommended_file(candidates, self.measured_bandwidth))

    def _on_fit_failed(
        self, repo_id: str | None, first_file: str, message: str, error: BaseException
    ) -> None:
        if repo_id != self._repo_id or first_file not in self._entries:
            return
        self.model.show_fit(first_file, None, "unknown")
        for item in self.model.mode_items(first_file):
            item.setToolTip(message)
        if isinstance(error, GatedRepoError):
            self._show_gate(message)

    # ---- selection and detail ----------------------------------------------------------

    def _current_entry(self) -> GgufEntry | None:
        index = self.tree.currentIndex()
        if not index.isValid():
            return None
        return index.siblingAtColumn(0).data(ENTRY_ROLE)

    def _on_tree_current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        entry = current.siblingAtColumn(0).data(ENTRY_ROLE) if current.isValid() else None
        self.download_button.setEnabled(entry is not None)
        if entry is not None:
            self._show_detail(entry)

    def _on_tree_double_clicked(self, index: QModelIndex) -> None:
        entry = index.siblingAtColumn(0).data(ENTRY_ROLE)
        if entry is not None:
            self.download_requested.emit(entry)

    def _on_download_clicked(self) -> None:
        entry = self._current_entry()
        if entry is not None:
            self.download_requested.emit(entry)

    def _show_detail(self, entry: GgufEntry) -> None:
        fit = self._fits.get(entry.first_file)
        parts = f" in {entry.n_parts} parts" if entry.is_split else ""
        if fit is None:
            self.detail_label.setText(
                f"{safe_text(entry.name)}: {fmt.size(entry.total_size)}{parts}."
            )
            self.detail.setRowCount(0)
            self.detail.hide()
            return
        self.detail.show()
        trained = f", trained for {fit.n_ctx_train:,} tokens" if fit.n_ctx_train else ""
        note = f" {fit.note}" if fit.note else ""
        self.detail_label.setText(
            f"{safe_text(entry.name)}: {fmt.size(entry.total_size)}{parts}; weights take "
            f"{fmt.size(fit.weights_bytes)}{trained}.{note}"
        )
        self.detail.setRowCount(len(fit.modes))
        for r, mode_fit in enumerate(fit.modes):
            supported = mode_fit.verdict != UNSUPPORTED
            cells = [
                mode_fit.mode.label,
                fmt.size(mode_fit.kv_bytes) if supported else "–",
                fmt.size(mode_fit.total_bytes) if supported else "–",
                mode_fit.verdict,
                fmt.tokens(mode_fit.largest_n_ctx) if mode_fit.largest_n_ctx else "none",
            ]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c == 3:
                    paint_verdict(item, mode_fit.verdict)
                    item.setToolTip(mode_fit.reason)
                self.detail.setItem(r, c, item)
