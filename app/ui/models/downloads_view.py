"""The download queue as a table: progress bar, bytes, speed, ETA, state; pause / resume / cancel.

DownloadsModel adapts the DownloadManager's signals to a QAbstractTableModel; the view
is separate and only calls the manager's methods.
"""

from __future__ import annotations

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionProgressBar,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.services.downloads import DownloadItem, DownloadManager, DownloadState
from app.ui.models import format as fmt

_Index = QModelIndex | QPersistentModelIndex
_ROOT = QModelIndex()  # the invisible root: these models are flat
PROGRESS_ROLE = Qt.ItemDataRole.UserRole + 1
KEY_ROLE = Qt.ItemDataRole.UserRole + 2

_STATE_TEXT = {
    DownloadState.QUEUED: "Queued",
    DownloadState.DOWNLOADING: "Downloading",
    DownloadState.PAUSED: "Paused",
    DownloadState.FINISHED: "Done",
    DownloadState.FAILED: "Failed",
    DownloadState.CANCELLED: "Cancelled",
}


class DownloadsModel(QAbstractTableModel):
    HEADERS = ("Model", "Progress", "Downloaded", "Speed", "Time left", "Status")

    def __init__(self, manager: DownloadManager, parent=None) -> None:
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

    def rowCount(self, parent: _Index = _ROOT) -> int:
        return 0 if parent.isValid() else len(self._keys)

    def columnCount(self, parent: _Index = _ROOT) -> int:
        return 0 if parent.isValid() else len(self.HEADERS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.HEADERS[section]
        return None

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        item = self._manager.item(self._keys[index.row()])
        col = index.column()
        if role == KEY_ROLE:
            return item.key
        if role == PROGRESS_ROLE:
            return _percent(item)
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
    def _text(item: DownloadItem, col: int) -> str:
        if col == 0:
            parts = f" ({item.entry.n_parts} parts)" if getattr(item.entry, "is_split", False) else ""
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


def _percent(item: DownloadItem) -> int:
    if item.state is DownloadState.FINISHED:
        return 100
    return int(100 * item.done_bytes / item.total_bytes) if item.total_bytes else 0


class _ProgressDelegate(QStyledItemDelegate):
    """Draws the Progress column as a progress bar."""

    def paint(self, painter, option, index) -> None:
        bar = QStyleOptionProgressBar()
        bar.rect = option.rect.adjusted(4, 5, -4, -5)
        bar.minimum, bar.maximum = 0, 100
        bar.progress = int(index.data(PROGRESS_ROLE) or 0)
        bar.text = f"{bar.progress}%"
        bar.textVisible = True
        bar.state = option.state
        style = option.widget.style() if option.widget else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ProgressBar, bar, painter, option.widget)


class DownloadsView(QWidget):
    """The queue with Pause / Resume / Cancel / Clear finished for the selected download."""

    def __init__(self, manager: DownloadManager, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.manager = manager
        self.model = DownloadsModel(manager, self)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.setItemDelegateForColumn(1, _ProgressDelegate(self.table))
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.setShowGrid(False)
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Fixed)
        header.resizeSection(1, 140)
        header.setStretchLastSection(False)

        self.pause_button = QPushButton("Pause")
        self.resume_button = QPushButton("Resume")
        self.cancel_button = QPushButton("Cancel")
        self.clear_button = QPushButton("Clear finished")
        self.empty_label = QLabel("No downloads yet. Pick a file in Discover and press Download.")
        self.empty_label.setStyleSheet("color: palette(mid);")

        buttons = QHBoxLayout()
        buttons.addWidget(self.empty_label, 1)
        for b in (self.pause_button, self.resume_button, self.cancel_button, self.clear_button):
            buttons.addWidget(b)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(buttons)
        layout.addWidget(self.table, 1)

        self.pause_button.clicked.connect(lambda: self._act(self.manager.pause))
        self.resume_button.clicked.connect(lambda: self._act(self.manager.resume))
        self.cancel_button.clicked.connect(lambda: self._act(self.manager.cancel))
        self.clear_button.clicked.connect(self._on_clear_clicked)
        self.table.selectionModel().selectionChanged.connect(lambda *_: self._update_buttons())
        manager.download_changed.connect(lambda _k: self._update_buttons())
        manager.download_removed.connect(lambda _k: self._update_buttons())
        self._update_buttons()

    def select(self, key: str) -> None:
        self.table.selectRow(self.model.row_of(key))

    def selected_key(self) -> str | None:
        rows = self.table.selectionModel().selectedRows()
        return self.model.key_at(rows[0].row()) if rows else None

    def _act(self, action) -> None:
        key = self.selected_key()
        if key is not None:
            action(key)

    def _on_clear_clicked(self) -> None:
        for item in self.manager.items():
            if item.state in (DownloadState.FINISHED, DownloadState.CANCELLED):
                self.manager.remove(item.key)

    def _update_buttons(self) -> None:
        key = self.selected_key()
        state = self.manager.item(key).state if key is not None else None
        self.pause_button.setEnabled(state in (DownloadState.DOWNLOADING, DownloadState.QUEUED))
        self.resume_button.setEnabled(
            state in (DownloadState.PAUSED, DownloadState.FAILED, DownloadState.CANCELLED)
        )
        self.cancel_button.setEnabled(
            state in (DownloadState.DOWNLOADING, DownloadState.QUEUED, DownloadState.PAUSED, DownloadState.FAILED)
        )
        self.clear_button.setEnabled(
            any(i.state in (DownloadState.FINISHED, DownloadState.CANCELLED) for i in self.manager.items())
        )
        self.empty_label.setVisible(self.model.rowCount() == 0)
