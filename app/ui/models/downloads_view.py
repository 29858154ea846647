"""The download queue as a table: progress bar, bytes, speed, ETA, state; pause / resume / cancel.

DownloadsModel adapts the DownloadManager's signals to a QAbstractTableModel; the view
is separate and only calls the manager's methods.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QModelIndex, QObject, QRect, Qt, Signal
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QStyledItemDelegate,
    QVBoxLayout,
    QWidget,
)

from app.platform import units as fmt
from app.platform.safe_text import safe_text
from app.services.downloads import Download, DownloadManager, DownloadState
from app.ui.models.flat_table import FlatTableModel, row_table
from app.ui.plain_text import plain_label
from app.ui.tones import ERROR, set_tone

PROGRESS_ROLE = Qt.ItemDataRole.UserRole + 1
KEY_ROLE = Qt.ItemDataRole.UserRole + 2
STATE_ROLE = Qt.ItemDataRole.UserRole + 3

_STATE_TEXT = {
    DownloadState.QUEUED: "Queued",
    DownloadState.DOWNLOADING: "Downloading",
    DownloadState.PAUSED: "Paused",
    DownloadState.FINISHED: "Done",
    DownloadState.FAILED: "Failed",
    DownloadState.CANCELLED: "Cancelled",
}


class DownloadsModel(FlatTableModel):
    HEADERS = ("Model", "Progress", "Downloaded", "Speed", "Time left", "Status")

    def __init__(self, manager: DownloadManager, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._manager = manager
        self._keys: list[str] = [i.key for i in manager.items()]
        manager.download_added.connect(self._on_manager_added)
        manager.download_removed.connect(self._on_manager_removed)
        manager.download_changed.connect(self._on_manager_changed)

    def key_at(self, row: int) -> str:
        return self._keys[row]

    def row_of(self, key: str) -> int:
        return self._keys.index(key)

    def row_count(self) -> int:
        return len(self._keys)

    def cell(self, row: int, col: int, role: int) -> object:
        item = self._manager.item(self._keys[row])
        if role == KEY_ROLE:
            return item.key
        if role == PROGRESS_ROLE:
            return _percent(item)
        if role == STATE_ROLE:
            return item.state
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(item, col)
        if role == Qt.ItemDataRole.ToolTipRole:
            if item.state is DownloadState.FAILED:
                return item.message
            return f"{item.entry.repo_id}: {item.entry.first_file}"
        if role == Qt.ItemDataRole.ForegroundRole and col == 5:
            if item.state is DownloadState.FAILED:
                return QColor("#b3261e")
            if item.state is DownloadState.FINISHED:
                return QColor("#1b7f3b")
        return None

    @staticmethod
    def _text(item: Download, col: int) -> str:
        if col == 0:
            parts = f" ({item.entry.n_parts} parts)" if item.entry.is_split else ""
            return f"{item.entry.name}{parts}"
        if col == 1:
            return f"{_percent(item)}%"
        if col == 2:
            return f"{fmt.size(item.done_bytes)} of {fmt.size(item.total_bytes)}"
        if col == 3:
            return fmt.speed(item.speed) if item.state is DownloadState.DOWNLOADING else ""
        if col == 4:
            return fmt.duration(item.eta_seconds)
        if item.state is DownloadState.FAILED:
            return f"Failed: {item.message}"
        return _STATE_TEXT[item.state]

    def _on_manager_added(self, key: str) -> None:
        if key in self._keys:
            return
        row = len(self._keys)
        self.beginInsertRows(QModelIndex(), row, row)
        self._keys.append(key)
        self.endInsertRows()

    def _on_manager_removed(self, key: str) -> None:
        if key not in self._keys:
            return
        row = self._keys.index(key)
        self.beginRemoveRows(QModelIndex(), row, row)
        self._keys.pop(row)
        self.endRemoveRows()

    def _on_manager_changed(self, key: str) -> None:
        if key in self._keys:
            row = self._keys.index(key)
            self.dataChanged.emit(self.index(row, 0), self.index(row, len(self.HEADERS) - 1))


def _percent(item: Download) -> int:
    if item.state is DownloadState.FINISHED:
        return 100
    return int(100 * item.done_bytes / item.total_bytes) if item.total_bytes else 0


class _ProgressDelegate(QStyledItemDelegate):
    """Draws the Progress column as a rounded bar with the percentage on it."""

    TRACK, FILL, DONE, FAILED = (
        QColor("#e6e9ef"),
        QColor("#2f6fdb"),
        QColor("#1b7f3b"),
        QColor("#d14343"),
    )

    def paint(self, painter: QPainter, option, index) -> None:
        percent = int(index.data(PROGRESS_ROLE) or 0)
        state = index.data(STATE_ROLE)
        rect = option.rect.adjusted(6, 7, -6, -7)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(self.TRACK)
        painter.drawRoundedRect(rect, 4, 4)
        fill = (
            self.DONE
            if state is DownloadState.FINISHED
            else (self.FAILED if state is DownloadState.FAILED else self.FILL)
        )
        if percent > 0:
            done = QRect(rect)
            done.setWidth(max(8, rect.width() * percent // 100))
            painter.setBrush(fill)
            painter.drawRoundedRect(done, 4, 4)
        painter.setPen(QColor("#ffffff") if percent >= 50 else QColor("#1f2328"))
        painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, f"{percent}%")
        painter.restore()


class DownloadsView(QWidget):
    """The queue with Pause / Resume / Cancel / Clear finished for the selected download, and
    Load into chat for a finished one.

    Signals: load_requested(str ref) - 'Load into chat' on a finished download (its path, as
        My models' Load gives it).
    """

    load_requested = Signal(str)

    def __init__(self, manager: DownloadManager, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.manager = manager
        self.model = DownloadsModel(manager, self)
        self.table = row_table(self.model)
        self.table.setItemDelegateForColumn(1, _ProgressDelegate(self.table))
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        header.resizeSection(0, 320)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Fixed)
        header.resizeSection(1, 150)
        header.setStretchLastSection(True)  # the status, with a failure's sentence
        self.table.setTextElideMode(Qt.TextElideMode.ElideRight)

        self.pause_button = QPushButton("Pause")
        self.resume_button = QPushButton("Resume")
        self.cancel_button = QPushButton("Cancel")
        self.clear_button = QPushButton("Clear finished")
        self.load_button = QPushButton("Load into chat")
        self.load_button.setObjectName("primaryButton")
        self.load_button.setToolTip("Load the downloaded model in the chat")
        self.empty_label = QLabel()
        self.empty_label.setWordWrap(True)  # unwrapped, its sentence held the window wide
        self.empty_label.setObjectName("hint")  # the look's hint colour, 4.5:1 in both

        buttons = QHBoxLayout()
        buttons.addWidget(self.empty_label, 1)  # also keeps the buttons at their natural size
        for b in (
            self.load_button,
            self.pause_button,
            self.resume_button,
            self.cancel_button,
            self.clear_button,
        ):
            buttons.addWidget(b)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 8, 0, 0)
        layout.addLayout(buttons)
        layout.addWidget(self.table, 1)
        # the selected download's failure, in full: it names the Hub's file
        self.detail_label = plain_label(QLabel())
        self.detail_label.setWordWrap(True)
        set_tone(self.detail_label, ERROR)
        self.detail_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.detail_label)

        self.pause_button.clicked.connect(lambda: self._act(self.manager.pause))
        self.resume_button.clicked.connect(lambda: self._act(self.manager.resume))
        self.cancel_button.clicked.connect(lambda: self._act(self.manager.cancel))
        self.clear_button.clicked.connect(self._on_clear_clicked)
        self.load_button.clicked.connect(self._on_load_clicked)
        self.table.selectionModel().selectionChanged.connect(lambda *_: self._update_buttons())
        # Bound, not lambdas: Qt drops them with the view, and the manager's threads may still
        # report a download after the view is gone.
        manager.download_changed.connect(self._on_download_changed)
        manager.download_removed.connect(self._on_download_changed)
        self._update_buttons()

    def select(self, key: str) -> None:
        self.table.selectRow(self.model.row_of(key))

    def selected_key(self) -> str | None:
        rows = self.table.selectionModel().selectedRows()
        return self.model.key_at(rows[0].row()) if rows else None

    def _act(self, action: Callable[[str], None]) -> None:
        key = self.selected_key()
        if key is not None:
            action(key)

    def _on_load_clicked(self) -> None:
        key = self.selected_key()
        model = self.manager.item(key).model if key is not None else None
        if model is not None:
            self.load_requested.emit(model.ref)

    def _on_clear_clicked(self) -> None:
        for item in self.manager.items():
            if item.state in (DownloadState.FINISHED, DownloadState.CANCELLED):
                self.manager.remove(item.key)

    def _on_download_changed(self, _key: str) -> None:
        self._update_buttons()

    def _update_buttons(self) -> None:
        key = self.selected_key()
        state = self.manager.item(key).state if key is not None else None
        finished = key is not None and self.manager.item(key).model is not None
        self.load_button.setEnabled(state is DownloadState.FINISHED and finished)
        self.pause_button.setEnabled(state in (DownloadState.DOWNLOADING, DownloadState.QUEUED))
        self.resume_button.setEnabled(
            state in (DownloadState.PAUSED, DownloadState.FAILED, DownloadState.CANCELLED)
        )
        self.cancel_button.setEnabled(
            state
            in (
                DownloadState.DOWNLOADING,
                DownloadState.QUEUED,
                DownloadState.PAUSED,
                DownloadState.FAILED,
            )
        )
        self.clear_button.setEnabled(
            any(
                i.state in (DownloadState.FINISHED, DownloadState.CANCELLED)
                for i in self.manager.items()
            )
        )
        # Cleared rather than hidden, so the label keeps pushing the buttons to the right.
        self.empty_label.setText(
            ""
            if self.model.rowCount()
            else "No downloads yet. Pick a file in Discover and press Download."
        )
        failed = key is not None and state is DownloadState.FAILED
        message = self.manager.item(key).message if failed and key else ""
        self.detail_label.setText(safe_text(message, 2000))
        self.detail_label.setVisible(failed)
