"""The dashboard's per-device view of a model split across RPC workers: one row per device
(this machine's CPU, then each worker's), its memory as llama.cpp read it after the load (a bar
of used over total), and the KV cache llama.cpp allocated there next to f16/f16. Hidden for a
load on this machine alone, so the dashboard then looks as it always did."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QProgressBar,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.engine.messages import Loaded
from app.kv.device_kv import MIB, DeviceRow, device_rows
from app.kv.kv_cache import KvCacheEstimate
from app.platform import units as fmt

COLUMNS = ("Device", "Memory (llama.cpp, after the load)", "KV cache", "at f16/f16", "saved")


def f16_ratios(estimate: KvCacheEstimate | None) -> list[float] | None:
    """Each cache's f16/f16 bytes over its bytes in the loaded K/V types, from the KV
    arithmetic (app.kv.kv_cache's estimate); None without it."""
    if estimate is None:
        return None
    fp16 = estimate.fp16_equivalent()
    return [
        c16.total_bytes / c.total_bytes if c.total_bytes else 1.0
        for c, c16 in zip(estimate.caches, fp16.caches, strict=True)
    ]


class DevicesPanel(QWidget):
    """`set_loaded(loaded, estimate)` when a model loads (None: unloaded)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("devicesPanel")
        self.rows: list[DeviceRow] = []
        self.title = QLabel("Memory per device (the model is split across workers)")
        self.title.setObjectName("sectionTitle")
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("deviceMemory")
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addWidget(self.title)
        layout.addWidget(self.table)
        self.hide()

    def set_loaded(self, loaded: Loaded | None, estimate: KvCacheEstimate | None = None) -> None:
        devices = loaded.device_memory if loaded is not None else ()
        if loaded is None or not devices:
            self.rows = []
            self.table.setRowCount(0)
            self.hide()
            return
        mode = loaded.options.kv.label
        self.table.setHorizontalHeaderItem(2, QTableWidgetItem(f"KV cache ({mode})"))
        caches = [(c.devices, c.device_mib) for c in loaded.kv_caches]
        self.rows = device_rows(devices, caches, f16_ratios(estimate))
        self.table.setRowCount(len(self.rows))
        for row, device in enumerate(self.rows):
            self._fill(row, device)
        height = self.table.horizontalHeader().height() + 4
        height += sum(self.table.rowHeight(r) for r in range(len(self.rows)))
        self.table.setFixedHeight(height)
        self.show()

    def _fill(self, row: int, device: DeviceRow) -> None:
        self.table.setItem(row, 0, QTableWidgetItem(device.label))
        bar = QProgressBar()
        bar.setRange(0, max(device.total_bytes // MIB, 1))
        bar.setValue(device.used_bytes // MIB)
        total = fmt.size(device.total_bytes, 1)
        if device.reports_free:
            used, free = fmt.size(device.used_bytes, 1), fmt.size(device.free_bytes, 1)
            bar.setFormat(f"{used} used of {total} ({free} free)")
        else:  # a CPU device: llama.cpp reports its RAM as all free
            bar.setFormat(f"{total} RAM (llama.cpp reports no use for a CPU device)")
        bar.setTextVisible(True)
        self.table.setCellWidget(row, 1, bar)
        kv16 = device.kv_f16_mib
        cells = [
            fmt.mib(device.kv_mib),
            fmt.mib(kv16) if kv16 is not None else "?",
            fmt.mib(kv16 - device.kv_mib) if kv16 is not None else "?",
        ]
        for column, text in enumerate(cells, start=2):
            item = QTableWidgetItem(text)
            item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.table.setItem(row, column, item)
