"""The load dialog's "Workers (other machines)" section, closed unless workers are set or the
user opens it: the llama.cpp RPC workers a model is split across (typed, or a worker started on
this computer), what a worker on a network address exposes, and the fit on every device from
check_rpc_load, redone off the GUI thread whenever the workers or the load settings change (the
latest request wins). Worker addresses come only from here and the model's remembered load
choice, never from a model or any downloaded file (docs/several-machines.md, Security)."""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.rpc_load_check import WorkersCheck, check_workers
from app.load.profile import LoadProfile
from app.load.rpc_workers import (
    MAX_WORKERS,
    check_address,
    exposure_warning,
    is_loopback,
    parse_layer_split,
)
from app.platform.errors import BadInputError
from app.services.local_workers import LocalWorkers
from app.services.tasks import TaskRunner
from app.ui.chat.collapsible import Collapsible
from app.ui.chat.device_fit import DeviceFit
from app.ui.plain_text import plain_label
from app.ui.tones import ERROR, WARNING, set_tone

log = logging.getLogger(__name__)

BACKENDS_ADVICE = "the Backends page"  # how to choose a backend with RPC, in the app


class WorkersBox(QWidget):
    """Signals:
    workers_changed(): a worker was added or removed (the dialog redoes its estimate).
    checked(object): a WorkersCheck for the settings last asked about (only the latest).
    """

    workers_changed = Signal()
    checked = Signal(object)

    def __init__(
        self,
        data_folder: Path,
        local_workers: LocalWorkers | None,
        advice: str,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("workersBox")
        self._folder, self._local, self.advice = data_folder, local_workers, advice
        self.result: WorkersCheck | None = None
        self.checking = False
        self._asked = 0  # the newest check asked for: older ones skip their work
        self._runner = TaskRunner(self, max_threads=1)

        self._build_list()
        self._build_split()
        self._build_messages()
        self._build_table()
        self._lay_out()
        self.add_button.clicked.connect(self._on_add_clicked)
        self.address.returnPressed.connect(self._on_add_clicked)
        self.remove_button.clicked.connect(self._on_remove_clicked)
        self.start_button.clicked.connect(self._on_start_clicked)
        self.split.editingFinished.connect(self._on_split_edited)
        if local_workers is not None:
            local_workers.started.connect(self._on_local_worker_started)
            local_workers.failed.connect(self._on_local_worker_failed)
        self._show_workers()

    # ---- the section's parts, top to bottom -----------------------------------------------

    def _build_list(self) -> None:
        """The workers' addresses, the address entry with Add and Remove, and the button that
        starts a worker here (shown only where the box was given local workers)."""
        self.list = QListWidget()
        self.list.setObjectName("workersList")
        self.list.setFixedHeight(max(self.fontMetrics().lineSpacing() * 4 + 8, 72))
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.address = QLineEdit()
        self.address.setObjectName("workerAddress")
        self.address.setPlaceholderText("host:port, e.g. 192.168.1.20:50052")
        self.add_button = QPushButton("Add")
        self.add_button.setObjectName("addWorker")
        self.remove_button = QPushButton("Remove")
        self.remove_button.setObjectName("removeWorker")
        self.start_button = QPushButton("Start a worker on this computer")
        self.start_button.setObjectName("startLocalWorker")
        self.start_button.setToolTip(
            "Runs 'kvstudio worker' on 127.0.0.1 and a free port, to try a split without a "
            "second machine; it stops when KV Studio closes."
        )
        self.start_button.setVisible(self._local is not None)

    def _build_split(self) -> None:
        self.split_label = QLabel("Layer split")
        self.split = QLineEdit()
        self.split.setObjectName("layerSplit")
        self.split.setPlaceholderText("by free memory; or a share per device, e.g. 1,3")
        self.split.setToolTip(
            "Each device's share of the layers, in the order of the table below (the workers' "
            "devices, then this computer's GPUs): llama.cpp's tensor split."
        )
        self._split: tuple[float, ...] = ()
        self._split_error = False

    def _build_messages(self) -> None:
        """A bad address or a worker that failed, and the warning for a worker on the network."""
        self.error = plain_label(QLabel())
        self.error.setObjectName("workerError")
        self.error.setWordWrap(True)
        set_tone(self.error, ERROR)
        self.error.hide()
        self.exposure = plain_label(QLabel())
        self.exposure.setObjectName("workerExposure")
        self.exposure.setWordWrap(True)
        set_tone(self.exposure, WARNING)
        self.exposure.hide()

    def _build_table(self) -> None:
        """The fit on every device, and the sentence under it (device_fit.py)."""
        self.device_fit = DeviceFit()
        self.table, self.sentence = self.device_fit.table, self.device_fit.sentence

    def _lay_out(self) -> None:
        about = QLabel(
            "Split the model across computers running 'kvstudio worker' (llama.cpp RPC). "
            "Their devices take layers first; this machine's CPU keeps the rest."
        )
        about.setWordWrap(True)
        about.setObjectName("hint")
        entry = QHBoxLayout()
        entry.addWidget(self.address, 1)
        entry.addWidget(self.add_button)
        entry.addWidget(self.remove_button)
        split_row = QHBoxLayout()
        split_row.addWidget(self.split_label)
        split_row.addWidget(self.split, 1)
        layout = QVBoxLayout()  # closed until workers are set or the user opens it
        self.section = Collapsible("Workers (other machines)", layout)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 6, 0, 0)
        outer.addWidget(self.section)
        layout.addWidget(about)
        layout.addWidget(self.list)
        layout.addLayout(entry)
        layout.addWidget(self.start_button, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addLayout(split_row)
        layout.addWidget(self.error)
        layout.addWidget(self.exposure)
        layout.addWidget(self.table)
        layout.addWidget(self.sentence)

    # ---- the list ----------------------------------------------------------------------

    @property
    def workers(self) -> tuple[str, ...]:
        return tuple(self.list.item(i).text() for i in range(self.list.count()))

    def set_workers(self, workers: tuple[str, ...], split: tuple[float, ...] = ()) -> None:
        """Show `workers` and their layer split (a remembered choice) without a change signal."""
        self.list.clear()
        self.list.addItems(list(workers))
        self._split, self._split_error = split, False
        self.split.setText(",".join(f"{share:g}" for share in split))
        self._show_workers()
        self.section.toggle.setChecked(self.section.opened or bool(workers))  # shown when set

    @property
    def layer_split(self) -> tuple[float, ...]:
        """Each device's share of the layers as last typed correctly; empty: by free memory, and
        always without workers (the split is theirs: a load on this machine alone has none)."""
        return self._split if self.workers else ()

    def _on_split_edited(self) -> None:
        text = self.split.text().strip()
        try:
            split = parse_layer_split(text, "The layer split") if text else ()
        except BadInputError as error:
            self._split_error = True
            self._say(str(error))
            self.workers_changed.emit()  # Load waits for a split it can use
            return
        changed = split != self._split or self._split_error
        self._split, self._split_error = split, False
        self._say("")
        if changed:
            self.workers_changed.emit()

    def add_worker(self, text: str) -> bool:
        """Add `text` as a worker address; a bad one is said in one sentence (False)."""
        address = text.strip()
        try:
            check_address(address)
            if address in self.workers:
                raise BadInputError(f"The worker at {address} is in the list already.")
            if len(self.workers) >= MAX_WORKERS:
                raise BadInputError(f"llama.cpp takes at most {MAX_WORKERS} workers.")
        except BadInputError as error:
            self._say(str(error))
            return False
        self._say("")
        self.list.addItem(address)
        self._show_workers()
        self.workers_changed.emit()
        return True

    def _on_add_clicked(self) -> None:
        if self.add_worker(self.address.text()):
            self.address.clear()

    def _on_remove_clicked(self) -> None:
        row = self.list.currentRow()
        if row < 0:
            row = self.list.count() - 1
        if row >= 0:
            self.list.takeItem(row)
            self._say("")
            self._show_workers()
            self.workers_changed.emit()

    def _on_start_clicked(self) -> None:
        if self._local is not None:
            self.start_button.setEnabled(False)
            self.start_button.setText("Starting a worker…")
            self._local.start()

    def _on_local_worker_started(self, address: str) -> None:
        self._reset_start_button()
        self.add_worker(address)

    def _on_local_worker_failed(self, message: str) -> None:
        self._reset_start_button()
        self._say(message)

    def _reset_start_button(self) -> None:
        self.start_button.setEnabled(True)
        self.start_button.setText("Start a worker on this computer")

    def _say(self, sentence: str) -> None:
        self.error.setText(sentence)
        self.error.setVisible(bool(sentence))

    def _show_workers(self) -> None:
        self.remove_button.setEnabled(self.list.count() > 0)
        self.list.setVisible(self.list.count() > 0)  # no empty box on a load on this machine
        self.split_label.setVisible(self.list.count() > 0)
        self.split.setVisible(self.list.count() > 0)
        exposed = [w for w in self.workers if not is_loopback(check_address(w)[0])]
        if exposed:
            host, port = check_address(exposed[0])
            text = exposure_warning(host, port, here=False)
            self.exposure.setText(text[0].upper() + text[1:])
        self.exposure.setVisible(bool(exposed))
        if not self.workers:
            self._asked += 1  # an answer still on its way is for workers no longer listed
            self.result, self.checking = None, False
            self.device_fit.hide()

    # ---- the fit on every device ---------------------------------------------------------

    def recheck(self, options: LoadProfile) -> None:
        """Redo the checks for `options` (its rpc_workers are this list) off the GUI thread."""
        self._asked += 1
        asked = self._asked
        self.checking = True
        self.result = None
        self.device_fit.show_asking()
        self._runner.submit(
            "check",
            self._check_if_latest,
            asked,
            options,
            on_done=self._on_checked,
            on_error=self._on_check_failed,
        )

    def _check_if_latest(self, asked: int, options: LoadProfile) -> WorkersCheck | None:
        if asked != self._asked:  # superseded while queued: skip the child process
            return None
        return check_workers(options, self._folder, BACKENDS_ADVICE, self.advice)

    def _on_checked(self, result: WorkersCheck | None) -> None:
        if result is None:
            return
        self._show_result(result)

    def _on_check_failed(self, message: str, _error: BaseException) -> None:
        self._show_result(WorkersCheck(None, message, forceable=False))

    def _show_result(self, result: WorkersCheck) -> None:
        self.checking = False
        self.result = result
        self.device_fit.show_result(result)
        self.checked.emit(result)

    @property
    def allows_load(self) -> bool:
        """Whether Load may be pressed: the checks answered, and any refusal can be forced."""
        return (
            not self.checking
            and not self._split_error
            and self.result is not None
            and (self.result.refusal is None or self.result.forceable)
        )

    def wait(self, msecs: int = 60000) -> bool:
        return self._runner.wait(msecs)
