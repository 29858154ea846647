"""The Backends page: which llama.cpp build the engine runs, the installed packages with their
manifests, and Add / Use / Verify / Remove.

Every action runs off the GUI thread (it loads libraries in a child process, hashes files):
app.services.tasks.TaskRunner brings the answer back. A refused package shows its one sentence
here and changes nothing; a successful Use emits `backend_switched`, and app/gui.py restarts the
engine on it (reloading the model that was loaded).
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.backends.built_in import built_in_folder
from app.backends.gpu_detect import detect_gpus
from app.backends.manifest import SIGNATURE_NAME, built_in_kernel, kernel_text
from app.backends.signing import UnsignedPackageError
from app.backends.store import BUILT_IN, BackendStore, InstalledBackend
from app.engine.backend_probe import probe
from app.engine.backend_verify import VerifyResult, verify
from app.platform import units as fmt
from app.platform.safe_text import safe_text
from app.services.tasks import TaskRunner
from app.ui.package_offer import PackageOffer, confirm_unsigned
from app.ui.plain_text import plain_label

# "FA kernel": the Flash Attention GPU kernels a build carries (kvstudio-fa.N with our patches).
COLUMNS = ("", "Backend", "GPU targets", "FA pairs", "FA kernel", "What")
# A package is a file from outside: its manifest's summary, note, targets and versions are its
# author's text, and reach this page cleaned and cut (a line of details, a cell).
LINE_LIMIT = 300


def manifest_lines(backend: InstalledBackend) -> list[str]:
    """What the manifest says, for the details box (before any verify)."""
    if backend.folder is None:
        return [
            "built-in: the llama.cpp compiled when llama-cpp-python was installed (pip).",
            "It is always there, and the engine falls back to it when a package is damaged.",
            "Flash Attention GPU kernels: " + kernel_text(built_in_kernel(built_in_folder())),
        ]
    manifest = backend.manifest
    if manifest is None:
        return [f"{backend.name}: damaged. {backend.problem}"]
    size = sum(f.size for f in manifest.files.values())
    lines = [
        f"{manifest.name}: {manifest.summary}",
        f"llama-cpp-python {manifest.llama_cpp_python}, ggml {manifest.ggml_version}, "
        f"{manifest.platform}",
        f"{len(manifest.files)} files, {fmt.size_number(size, 'MiB')} MiB: "
        f"{', '.join(sorted(manifest.files))}",
        "GPU targets: " + (", ".join(manifest.gpu_targets) or "none (CPU)"),
        "Flash Attention K-V pairs: "
        + (", ".join(manifest.fa_pairs) or "every pair (no GPU kernel list)"),
        "Flash Attention GPU kernels: " + kernel_text(manifest.kernel),
        f"Version: {manifest.version or 'from before releases'}; "
        + ("signed" if (backend.folder / SIGNATURE_NAME).is_file() else "not signed")
        + " (the signature was checked when it was added)",
    ]
    for target, per in sorted(manifest.instruction_counts.items()):
        counts = ", ".join(f"{pair} {n}" for pair, n in sorted(per.items()))
        lines.append(f"int8 dot instructions, {target}: {counts}")
    if manifest.build.get("note"):
        lines.append(f"Note: {manifest.build['note']}")
    return lines


class BackendsPage(QWidget):
    """Signals: backend_switched(str): the engine should restart on this backend.
    task_finished(str): an Add, Use, Verify or Remove ended; the message shown."""

    backend_switched = Signal(str)
    task_finished = Signal(str)

    def __init__(self, store: BackendStore, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.tasks = TaskRunner(self, max_threads=1)  # one change at a time
        self.last_verify: VerifyResult | None = None
        title = QLabel("Backends")
        title.setObjectName("pageTitle")
        title.setStyleSheet("font-size: 18px; font-weight: 600;")
        self.in_use = plain_label(QLabel())  # its notice quotes a package's problem
        self.in_use.setWordWrap(True)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.add_button = QPushButton("Add package…")
        self.use_button = QPushButton("Use")
        self.verify_button = QPushButton("Verify")
        self.remove_button = QPushButton("Remove")
        buttons = QHBoxLayout()
        for button in (self.add_button, self.use_button, self.verify_button, self.remove_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setTextFormat(Qt.TextFormat.PlainText)  # file names are not markup
        self.details = QPlainTextEdit()
        self.details.setReadOnly(True)
        # the published packages: the one that fits this GPU, a newer version of an installed
        # one; read only when the user presses Look, installed only when they press Install
        self.offer = PackageOffer(store, detect=detect_gpus, parent=self)
        self.offer.installed.connect(self._on_offer_installed)
        self.offer.install_finished.connect(self._on_offer_finished)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 16, 16, 16)
        layout.addWidget(title)
        layout.addWidget(self.in_use)
        layout.addWidget(self.table, 1)
        layout.addLayout(buttons)
        layout.addWidget(self.offer)
        layout.addWidget(self.message)
        layout.addWidget(self.details, 1)
        self.add_button.clicked.connect(self._on_add_clicked)
        self.use_button.clicked.connect(lambda: self.use(self.selected()))
        self.verify_button.clicked.connect(lambda: self.verify(self.selected()))
        self.remove_button.clicked.connect(lambda: self.remove(self.selected()))
        self.table.itemSelectionChanged.connect(self._on_selection_changed)
        self.tasks.busy_changed.connect(self._on_busy_changed)
        self.refresh()

    # ---- what is shown ----------------------------------------------------------------------

    def refresh(self) -> None:
        chosen = self.store.chosen_name()
        selected = self.selected()
        backends = self.store.installed()
        self.table.setRowCount(len(backends))
        for row, backend in enumerate(backends):
            manifest = backend.manifest
            if backend.folder is None:
                kernel = built_in_kernel(built_in_folder()) or "-"
                cells = ("-", "-", kernel, "llama-cpp-python's own build")
            elif manifest is None:
                cells = ("-", "-", "-", f"damaged: {backend.problem}")
            else:
                cells = (
                    ", ".join(manifest.gpu_targets) or "-",
                    ", ".join(manifest.fa_pairs) or "all",
                    manifest.kernel or "-",
                    manifest.summary,
                )
            mark = "● in use" if backend.name == chosen else ""
            for column, text in enumerate((mark, backend.name, *cells)):
                self.table.setItem(row, column, QTableWidgetItem(safe_text(text, LINE_LIMIT)))
        names = [b.name for b in backends]
        self.table.selectRow(names.index(selected) if selected in names else names.index(chosen))
        engine_runs, notice = self.store.for_engine()
        self.in_use.setText(
            f"The engine runs the {engine_runs.name} backend."
            + (f" {safe_text(notice, 1000)}" if notice else "")
        )

    def selected(self) -> str:
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        if not rows:
            return BUILT_IN
        item = self.table.item(rows[0].row(), 1)
        return item.text() if item is not None else BUILT_IN

    def _on_selection_changed(self) -> None:
        name = self.selected()
        backend = next((b for b in self.store.installed() if b.name == name), None)
        if backend is None:
            return
        lines = manifest_lines(backend)
        if self.last_verify is not None and self.last_verify.backend.name == name:
            lines += ["", *self.last_verify.lines()]
        self.details.setPlainText("\n".join(safe_text(line, LINE_LIMIT) for line in lines))
        self.remove_button.setEnabled(backend.folder is not None and not self.tasks.is_busy())

    def _on_busy_changed(self, busy: bool) -> None:
        for button in (self.add_button, self.use_button, self.verify_button, self.remove_button):
            button.setEnabled(not busy)
        if not busy:
            self._on_selection_changed()

    def _say(self, text: str) -> None:
        self.message.setText(safe_text(text, 1000))
        self.refresh()
        self._on_selection_changed()
        self.task_finished.emit(text)

    # ---- actions ------------------------------------------------------------------------------

    def _on_add_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self,
            "Add a backend package",
            os.path.expanduser("~"),
            "Backend packages (*.tar.gz);;All files (*)",
        )
        if path:
            self.add(Path(path))

    def add(self, archive: Path, *, allow_unsigned: bool = False) -> None:
        self.message.setText(f"Checking {archive.name} (signature, files and a test load)…")

        def failed(message: str, error: BaseException) -> None:
            # the GUI's --allow-unsigned: asked, for this one package
            if isinstance(error, UnsignedPackageError) and confirm_unsigned(self, archive.name):
                self.add(archive, allow_unsigned=True)
                return
            self._say(message)

        self.tasks.submit(
            "change",
            partial(self.store.add, allow_unsigned=allow_unsigned),
            archive,
            probe,
            on_done=lambda b: self._say(
                f"Added the {b.name} backend. Select it and press Use to run the engine on it."
            ),
            on_error=failed,
        )

    def _on_offer_installed(self, backend: InstalledBackend) -> None:
        self.refresh()
        self.backend_switched.emit(backend.name)

    def _on_offer_finished(self, text: str) -> None:
        self.message.setText("")
        self.refresh()
        self.task_finished.emit(text)

    def use(self, name: str) -> None:
        self.message.setText(f"Checking the {name} backend (files and a test load)…")

        def done(backend: InstalledBackend) -> None:
            self._say(f"The engine now runs the {backend.name} backend.")
            self.backend_switched.emit(backend.name)

        self.tasks.submit(
            "change",
            self.store.use,
            name,
            probe,
            on_done=done,
            on_error=lambda message, _e: self._say(message),
        )

    def verify(self, name: str) -> None:
        self.message.setText(f"Verifying the {name} backend…")

        def done(result: VerifyResult) -> None:
            self.last_verify = result
            verdict = "verified" if result.ok else "has a problem: " + "; ".join(result.problems)
            self._say(f"The {name} backend {verdict}.")

        self.tasks.submit(
            "change",
            verify,
            self.store,
            name,
            on_done=done,
            on_error=lambda message, _e: self._say(message),
        )

    def remove(self, name: str) -> None:
        was_chosen = self.store.chosen_name() == name

        def done(_result: object) -> None:
            self._say(f"Removed the {name} backend.")
            if was_chosen:  # the engine ran it: it goes back to the built-in one
                self.backend_switched.emit(BUILT_IN)

        self.tasks.submit(
            "change",
            self.store.remove,
            name,
            on_done=done,
            on_error=lambda message, _e: self._say(message),
        )
