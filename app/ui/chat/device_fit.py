"""The Workers section's fit on every device: a table of each device's share of a load split
across llama.cpp RPC workers (weights, KV cache, compute buffer, free memory) and one sentence
under it (fits, naming the device with the least room left, or why not), from a WorkersCheck."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
)

from app.engine.rpc_load_check import RpcLoadCheck, WorkersCheck
from app.kv.rpc_fit import DeviceShare
from app.platform import units as fmt
from app.platform.units import llama_mib
from app.ui.plain_text import plain_label
from app.ui.tones import ERROR, set_tone

COLUMNS = ("Device", "Weights", "KV cache", "Compute", "Free")
ASKING = "Asking the workers and reading their devices' free memory…"


class DeviceFit:
    """The table and its sentence (two widgets the section lays out itself)."""

    def __init__(self) -> None:
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("deviceFit")
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)  # "RPC1 (host:port)"
        self.table.hide()
        self.sentence = plain_label(QLabel())
        self.sentence.setObjectName("deviceFitSentence")
        self.sentence.setWordWrap(True)
        self.sentence.hide()

    def show_asking(self) -> None:
        """The checks are running: the sentence says so, in the section's own colour."""
        set_tone(self.sentence, "")
        self.sentence.setText(ASKING)
        self.sentence.show()

    def hide(self) -> None:
        self.table.hide()
        self.sentence.hide()

    def show_result(self, result: WorkersCheck) -> None:
        """Each device's share in the table, and the verdict (a refusal in the refusal colour)."""
        check = result.check
        shares = check.fit.shares if check is not None else ()
        self.table.setRowCount(len(shares))
        for row, share in enumerate(shares):
            for column, (text, tip) in enumerate(_cells(share)):
                item = QTableWidgetItem(text)
                item.setToolTip(tip)
                if column:
                    item.setTextAlignment(
                        Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                    )
                self.table.setItem(row, column, item)
        self.table.setVisible(bool(shares))
        if shares:
            header_height = self.table.horizontalHeader().height()
            rows_height = sum(self.table.rowHeight(r) for r in range(len(shares)))
            self.table.setFixedHeight(header_height + rows_height + 4)
        lines = []
        if result.refusal is not None:
            lines.append(result.refusal)
        elif check is not None:
            lines.append(_fits_sentence(check))
        if check is not None:
            lines += check.notices()
        self.sentence.setText(" ".join(lines))
        set_tone(self.sentence, ERROR if result.refusal is not None else "")
        self.sentence.setVisible(bool(lines))


def _cells(share: DeviceShare) -> list[tuple[str, str]]:
    """(text, tooltip) per column for one device's share."""
    per_cache = ", ".join(f"{llama_mib(b).strip()} MiB" for b in share.kv_bytes_per_cache)
    layers = f"{len(share.layers)} layers" + (" and the output layer" if share.has_output else "")
    return [
        (share.label, layers),
        (fmt.size(share.weights_bytes, 1), "the weights of its layers"),
        (
            fmt.size(share.kv_bytes, 2, unit="MiB"),
            f"per cache, as llama.cpp allocates it: {per_cache}",
        ),
        (fmt.size(share.compute_bytes, 1), "compute buffer (estimated)"),
        (fmt.size(share.budget_bytes, 1), "free memory as llama.cpp reads it"),
    ]


def _fits_sentence(check: RpcLoadCheck) -> str:
    """A load that fits, in one sentence naming the device with the least room left."""
    fit = check.fit
    share = fit.runs_out_first()
    return (
        f"Fits at {fit.n_ctx:,} tokens ({fit.mode.label}) on every device; the least room is "
        f"left on {share.label}: it needs {fmt.size(share.need_bytes, 1)} of "
        f"{fmt.size(share.budget_bytes, 1)} free."
    )
