"""The Compare section: settings, run / cancel, the estimate and progress with the time left
(compare_progress.py), results table, bar charts, and CSV / PNG export. The run itself is
app.services.compare_runner.CompareRunner."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.engine.compare_result import COLUMNS, CompareResult
from app.engine.compare_words import HEADINGS, few_tokens_note, gain_sentence, too_few_scored
from app.ui.dashboard.bar_chart import CompareBarChart
from app.ui.dashboard.compare_progress import CompareProgress

PEAK_COLUMN = "peak_memory_mib"
QUALITY_COLUMNS = ("perplexity", "mean_kl_divergence", "top1_agreement")
FEW_TOKENS_MARK = " *"  # after a quality figure that rests on too few tokens

log = logging.getLogger(__name__)


class CompareRunSettings(TypedDict, total=False):
    """What a comparison may be started with: the panel's boxes (n_ctx, depth,
    quality_chunks) and the rest of app.engine.compare.run_compare's options."""

    n_ctx: int
    depth: int
    quality_chunks: int
    modes: Sequence[str] | str | None
    reference_text: str | None
    n_gpu_layers: int
    n_prompt: int
    n_gen: int
    chunk_tokens: int
    n_threads: int | None
    repetitions: int
    sample_hz: float
    force: bool


def _two_lines(label: str) -> str:
    """A long column name on two lines: ten columns share 870 px at a 1024 px window."""
    if len(label) <= 10 or " " not in label:
        return label
    words = label.split(" ")
    cut = min(range(1, len(words)), key=lambda i: abs(len(" ".join(words[:i])) - len(label) / 2))
    return " ".join(words[:cut]) + "\n" + " ".join(words[cut:])


def _spin(lo: int, hi: int, value: int, step: int, suffix: str = "") -> QSpinBox:
    box = QSpinBox()
    box.setRange(lo, hi)
    box.setSingleStep(step)
    box.setValue(value)
    box.setSuffix(suffix)
    box.setGroupSeparatorShown(True)
    return box


class ComparePanel(QWidget):
    """Signals:
    run_requested(dict): Run was pressed; the settings (n_ctx, depth, quality_chunks).
    cancel_requested(): Cancel was pressed.
    settings_changed(dict): the user changed a setting (the estimate follows).
    """

    run_requested = Signal(dict)
    cancel_requested = Signal()
    settings_changed = Signal(dict)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        # A result's rows, or an opened run's (the file's values, whatever their types).
        self.rows: list[Mapping[str, Any]] = []
        self.result: CompareResult | None = None
        self.ctx_box = _spin(256, 1 << 20, 8192, 1024, " tokens")
        self.depth_box = _spin(0, 1 << 20, 0, 512, " tokens")
        self.chunks_box = _spin(0, 64, 4, 1, " x 512")
        self.chunks_box.setToolTip(
            "Quality: chunks of 512 tokens of the reference text (0 skips quality)"
        )
        self.run_button = QPushButton("Run comparison")
        self.run_button.setDefault(True)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.time_view = CompareProgress()
        self.progress = self.time_view.bar
        self.status = QLabel(
            "f16/f16, q8_0/f16 and q8_0/q8_0, each in a fresh engine: memory, "
            "speed at the depth, and quality against f16/f16 on Python's own help text."
        )
        self.status.setWordWrap(True)
        self.status.setObjectName("dashboardNote")

        self.table = self._headed_table()
        self._fit_table_height(3)
        # The run's last word: what int8-K gains on this model (compare_words.gain_sentence).
        self.gain = QLabel("")
        self.gain.setObjectName("compareGain")
        self.gain.setWordWrap(True)
        self.gain.setTextFormat(Qt.TextFormat.PlainText)
        self.gain.setStyleSheet("font-weight: 600;")
        self.gain.hide()
        self.chart = CompareBarChart()
        self.csv_button = QPushButton("Export CSV...")
        self.png_button = QPushButton("Export PNG...")
        for button in (self.csv_button, self.png_button):
            button.setEnabled(False)

        settings = QHBoxLayout()
        for text, box in (
            ("Context", self.ctx_box),
            ("Depth", self.depth_box),
            ("Quality", self.chunks_box),
        ):
            label = QLabel(text)
            label.setBuddy(box)
            settings.addWidget(label)
            settings.addWidget(box)
            settings.addSpacing(8)
        settings.addStretch(1)
        settings.addWidget(self.run_button)
        settings.addWidget(self.cancel_button)
        exports = QHBoxLayout()
        exports.addStretch(1)
        exports.addWidget(self.csv_button)
        exports.addWidget(self.png_button)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(settings)
        layout.addWidget(self.time_view)
        layout.addWidget(self.status)
        layout.addWidget(self.table)
        layout.addWidget(self.gain)
        layout.addWidget(self.chart, 1)
        layout.addLayout(exports)

        self.run_button.clicked.connect(self._on_run_clicked)
        self.cancel_button.clicked.connect(self.cancel_requested.emit)
        self.csv_button.clicked.connect(self._on_csv_clicked)
        self.png_button.clicked.connect(self._on_png_clicked)
        for box in (self.ctx_box, self.depth_box, self.chunks_box):
            box.valueChanged.connect(self._on_setting_changed)

    @staticmethod
    def _headed_table() -> QTableWidget:
        """The results table, its headings in words with the abbreviation as the tooltip."""
        table = QTableWidget(0, len(COLUMNS))
        for column, (key, short, _) in enumerate(COLUMNS):
            words, abbreviation = HEADINGS.get(key, (short, short))
            heading = QTableWidgetItem(_two_lines(words))
            heading.setToolTip(abbreviation)
            table.setHorizontalHeaderItem(column, heading)
        table.verticalHeader().setVisible(False)
        table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        return table

    # ---- state from the page ----------------------------------------------------------

    def settings(self) -> CompareRunSettings:
        return {
            "n_ctx": self.ctx_box.value(),
            "depth": self.depth_box.value(),
            "quality_chunks": self.chunks_box.value(),
        }

    def show_settings(self, n_ctx: int, depth: int, quality_chunks: int) -> None:
        """Show the settings a run uses (it may be started with others than the boxes')."""
        self.ctx_box.setValue(n_ctx)
        self.depth_box.setValue(depth)
        self.chunks_box.setValue(quality_chunks)

    def set_running(self, running: bool) -> None:
        self.run_button.setEnabled(not running and self._can_run)
        self.cancel_button.setEnabled(running)
        for box in (self.ctx_box, self.depth_box, self.chunks_box):
            box.setEnabled(not running)

    _can_run = False

    def set_can_run(self, can_run: bool, why: str = "") -> None:
        self._can_run = can_run
        self.run_button.setEnabled(can_run and not self.cancel_button.isEnabled())
        self.run_button.setToolTip("" if can_run else why)

    def set_progress(self, fraction: float, message: str) -> None:
        self.time_view.step_reported(fraction)
        self.status.setText(message)

    def set_peak_measure(self, what: str, words: str) -> None:
        """Name what the peak column measures (`what`: "RSS", `words`: "engine RSS,
        psutil"): the memory chart's peak is over the whole recording, this one over each
        mode's load and speed run."""
        column = [key for key, _, _ in COLUMNS].index(PEAK_COLUMN)
        item = QTableWidgetItem(f"Peak {what} (MiB),\nload + speed")
        item.setToolTip(
            f"peak MiB: the highest {words} while the mode loaded and ran its speed test"
        )
        self.table.setHorizontalHeaderItem(column, item)
        self._fit_table_height(max(3, len(self.rows)))

    def set_status(self, message: str) -> None:
        self.status.setText(message)

    def set_rows(self, rows: Sequence[Mapping[str, object]], title: str = "") -> None:
        self.rows = list(rows)
        self.table.setRowCount(len(rows))
        self._fit_table_height(len(rows))
        for r, row in enumerate(rows):
            for c, (key, _, fmt) in enumerate(COLUMNS):
                value = row.get(key)
                text = (
                    "-"
                    if value is None
                    else (fmt.format(value) if not isinstance(value, str) else value)
                )
                few = key in QUALITY_COLUMNS and value is not None and too_few_scored(row)
                item = QTableWidgetItem(text + (FEW_TOKENS_MARK if few else ""))
                align = Qt.AlignmentFlag.AlignVCenter | (
                    Qt.AlignmentFlag.AlignLeft if c == 0 else Qt.AlignmentFlag.AlignRight
                )
                item.setTextAlignment(align)
                if few:
                    item.setToolTip(few_tokens_note(row))
                elif row.get("warnings"):
                    item.setToolTip(str(row["warnings"]))
                self.table.setItem(r, c, item)
        self._show_gain(rows)
        self.chart.set_rows(rows, title)
        for button in (self.csv_button, self.png_button):
            button.setEnabled(bool(rows))

    def _show_gain(self, rows: Sequence[Mapping[str, object]]) -> None:
        """The sentence under the table; quality figures on too few tokens are said too."""
        text = gain_sentence(rows)
        flagged = next((row for row in rows if too_few_scored(row)), None)
        if text and flagged is not None:
            text += f" {FEW_TOKENS_MARK.strip()} {few_tokens_note(flagged)}"
        self.gain.setText(text)
        self.gain.setVisible(bool(text))

    def _fit_table_height(self, rows: int) -> None:
        header = self.table.horizontalHeader().sizeHint().height()
        row = self.table.verticalHeader().defaultSectionSize()
        self.table.setFixedHeight(header + row * max(rows, 3) + 2 * self.table.frameWidth() + 2)

    def set_result(self, result: CompareResult, title: str = "") -> None:
        self.result = result
        self.set_rows(result.rows(), title)

    # ---- export -----------------------------------------------------------------------

    def export_csv(self, path: str | Path) -> Path:
        import csv
        import io

        path = Path(path)
        if self.result is not None:
            text = self.result.to_csv()
        else:  # rows from an opened recording
            out = io.StringIO()
            writer = csv.DictWriter(out, fieldnames=list(self.rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(self.rows)
            text = out.getvalue()
        path.write_text(text, encoding="utf-8")
        return path

    def export_png(self, path: str | Path) -> Path:
        return self.chart.save_png(path)

    def _on_setting_changed(self, _value: int) -> None:
        self.settings_changed.emit(self.settings())

    def _on_run_clicked(self) -> None:
        self.run_requested.emit(self.settings())

    def _on_csv_clicked(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "Export comparison as CSV", "kv-compare.csv", "CSV (*.csv)"
        )
        if path:
            self.set_status(f"Saved {self.export_csv(path)}")

    def _on_png_clicked(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "Export comparison chart", "kv-compare.png", "PNG (*.png)"
        )
        if path:
            self.set_status(f"Saved {self.export_png(path)}")
