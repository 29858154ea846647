"""The shared shape of the Models page's tables: flat rows under fixed column headers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

from PySide6.QtCore import (
    QAbstractItemModel,
    QAbstractTableModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    Qt,
)
from PySide6.QtWidgets import QAbstractItemView, QTableView

from app.ui.plain_text import shown

Index = QModelIndex | QPersistentModelIndex
ROOT = QModelIndex()  # the invisible root: these models are flat
Row = TypeVar("Row")


class FlatTableModel(QAbstractTableModel):
    """A table model with `HEADERS` as its columns; subclasses say how many rows with
    `row_count()` and what a cell holds with `cell()`. Their rows carry file names, a file's
    metadata and the Hub's words, so text leaves through `shown` (cleaned, cut, tooltips
    escaped) at this one data()."""

    HEADERS: tuple[str, ...] = ()

    def row_count(self) -> int:
        raise NotImplementedError

    def cell(self, row: int, column: int, role: int) -> object:
        raise NotImplementedError

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        if not index.isValid():
            return None
        return shown(self.cell(index.row(), index.column(), role), role)

    def rowCount(self, parent: Index = ROOT) -> int:
        return 0 if parent.isValid() else self.row_count()

    def columnCount(self, parent: Index = ROOT) -> int:
        return 0 if parent.isValid() else len(self.HEADERS)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.HEADERS[section]
        return None


class ListTableModel(FlatTableModel, Generic[Row]):
    """A FlatTableModel over a plain list of row objects, replaced all at once."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._rows: list[Row] = []

    def set_rows(self, rows: Sequence[Row]) -> None:
        self.beginResetModel()
        self._rows = list(rows)
        self.endResetModel()

    def row_at(self, row: int) -> Row:
        return self._rows[row]

    def rows(self) -> list[Row]:
        return list(self._rows)

    def row_count(self) -> int:
        return len(self._rows)


def row_table(model: QAbstractItemModel) -> QTableView:
    """A read-only table view that selects one whole row at a time, as the Models page's
    tables all do; callers add their own column sizes and extras."""
    table = QTableView()
    table.setModel(model)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.verticalHeader().hide()
    table.setShowGrid(False)
    table.setWordWrap(False)
    return table
