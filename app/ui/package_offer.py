"""The published backend packages, read from the index only when the user asks: which one fits
the GPU found, whether an installed package has a newer version, and installing either with the
app's downloader (progress, cancel). Part of the first-run dialog and of the Backends page.

Nothing is read from the network until "Look for packages online" is pressed, and nothing is
installed or updated until the user presses Install or Update. The index, the download, the
checks and the test load run off the GUI thread (app.services.tasks.TaskRunner).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.backends.gpu_advice import BUILT_IN, Recommendation, recommend
from app.backends.gpu_detect import Gpu
from app.backends.index_install import fetch_index, install_entry
from app.backends.package_archive import platform_tag
from app.backends.package_index import IndexEntry, PackageIndex, update_for
from app.backends.store import BackendStore, InstalledBackend, Probe
from app.engine.backend_probe import probe
from app.models.hub.download_control import DownloadCancelled, DownloadControl
from app.platform import units as fmt
from app.services.tasks import TaskRunner

LOOK_TEXT = "Look for packages online"
Detect = Callable[[], list[Gpu]]


def confirm_unsigned(parent: QWidget, archive: str) -> bool:
    """Ask before installing a package without a signature (the GUI's --allow-unsigned)."""
    answer = QMessageBox.warning(
        parent,
        "Install an unsigned package?",
        f"{archive} is not signed, so nothing proves who built it or that it is unchanged. "
        "Install it only if you built it yourself.",
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
        QMessageBox.StandardButton.No,
    )
    return answer == QMessageBox.StandardButton.Yes


class DownloadProgress(QObject):
    """Signals: progressed(int done, int total): download bytes, emitted on the worker thread
    and delivered on the GUI thread (queued, since this object lives there). Shared with the
    first-run dialog's install from an address."""

    progressed = Signal(int, int)


class PackageOffer(QWidget):
    """Signals: index_shown(object): the PackageIndex, once its offer is shown.
    installed(object): an InstalledBackend, now the engine's backend.
    install_finished(str): an index read or an install ended, well or not; the sentence shown."""

    index_shown = Signal(object)
    installed = Signal(object)
    install_finished = Signal(str)

    def __init__(
        self,
        store: BackendStore,
        probe_with: Probe = probe,
        detect: Detect | None = None,
        parent: QWidget | None = None,
    ) -> None:
        """`detect`: find the GPUs when Look is pressed (the Backends page); the first-run
        dialog has found them already and calls set_recommendation instead."""
        super().__init__(parent)
        self.store = store
        self.probe_with = probe_with
        self.detect = detect
        self.recommendation: Recommendation | None = None
        self.offer: IndexEntry | None = None
        self.newer: IndexEntry | None = None
        self.tasks = TaskRunner(self, max_threads=1)
        self._control: DownloadControl | None = None
        self._progress = DownloadProgress(self)
        self._progress.progressed.connect(self._on_download_progressed)
        self.look_button = QPushButton(LOOK_TEXT)
        self.sentence = QLabel("Nothing is read from the network until you press it.")
        self.sentence.setTextFormat(Qt.TextFormat.PlainText)  # the index's words are not markup
        self.sentence.setWordWrap(True)
        self.install_button = QPushButton()
        self.update_button = QPushButton()
        self.cancel_button = QPushButton("Cancel download")
        self.progress = QProgressBar()
        for widget in (self.install_button, self.update_button, self.cancel_button, self.progress):
            widget.hide()
        row = QHBoxLayout()
        for button in (self.look_button, self.install_button, self.update_button):
            row.addWidget(button)
        row.addWidget(self.cancel_button)
        row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.sentence)
        layout.addWidget(self.progress)
        self.look_button.clicked.connect(self.look)
        self.install_button.clicked.connect(lambda: self.install(self.offer))
        self.update_button.clicked.connect(lambda: self.install(self.newer))
        self.cancel_button.clicked.connect(self._on_cancel_clicked)
        self.tasks.busy_changed.connect(self._on_busy_changed)

    def set_recommendation(self, recommendation: Recommendation) -> None:
        """The package the GPU found wants (the first-run dialog's detection)."""
        self.recommendation = recommendation

    # ---- the index -----------------------------------------------------------------------

    def look(self) -> None:
        self.sentence.setText("Reading the package index…")
        self.tasks.submit(
            "index", self._read_index, on_done=self._show_index, on_error=self._on_index_failed
        )

    def _read_index(self) -> PackageIndex:
        """On the worker thread: the GPUs (when this offer finds them itself), then the index."""
        if self.detect is not None and self.recommendation is None:
            self.recommendation = recommend(self.detect())
        return fetch_index()

    def _on_index_failed(self, message: str, _error: BaseException) -> None:
        self._say(message)

    def _show_index(self, index: PackageIndex) -> None:
        here = platform_tag()
        wanted = self.recommendation.backend if self.recommendation else BUILT_IN
        self.offer = index.entry_for(wanted, here) if wanted != BUILT_IN else None
        installed = [b.manifest for b in self.store.installed() if b.manifest is not None]
        updates = [u for u in (update_for(index, m) for m in installed) if u is not None]
        self.newer = updates[0] if updates else None
        lines = []
        if self.offer is not None and wanted not in {m.name for m in installed}:
            gpu = self.recommendation.gpu if self.recommendation else None
            lines.append(
                f"The index offers {self.offer.describe()}"
                + (f" for your {gpu.name}." if gpu else ".")
            )
            self.install_button.setText(f"Install {self.offer.variant} {self.offer.version}")
        elif wanted != BUILT_IN and self.offer is None:
            lines.append(f"The index has no {wanted} package for {here}.")
        if self.newer is not None:
            old = next(m.version for m in installed if m.name == self.newer.variant)
            lines.append(
                f"A newer {self.newer.variant} package is available: {self.newer.version} "
                f"(installed: {old or 'a version from before releases'})."
            )
            self.update_button.setText(f"Update {self.newer.variant} to {self.newer.version}")
        elif installed:
            names = ", ".join(m.name for m in installed)
            lines.append(f"The installed packages ({names}) are the newest the index has.")
        if not lines:
            lines.append(f"The index lists {len(index.entries)} packages; none is needed here.")
        self.install_button.setVisible("The index offers" in lines[0])
        self.update_button.setVisible(self.newer is not None)
        self.sentence.setText(" ".join(lines))
        self.index_shown.emit(index)

    # ---- installing --------------------------------------------------------------------------

    def install(self, entry: IndexEntry | None) -> None:
        if entry is None:
            return
        self._control = DownloadControl()
        self.sentence.setText(f"Downloading {entry.describe()}…")
        self.progress.setRange(0, 0)
        self.progress.show()
        self.cancel_button.show()
        self.tasks.submit(
            "install",
            self._download_and_install,
            entry,
            self._control,
            on_done=self._on_installed,
            on_error=self._on_install_failed,
        )

    def _download_and_install(
        self, entry: IndexEntry, control: DownloadControl
    ) -> InstalledBackend:
        """On the worker thread: download, check, test-load, use (app/backends/index_install)."""
        return install_entry(
            self.store,
            entry,
            self.probe_with,
            control=control,
            on_progress=self._progress.progressed.emit,
        )

    def _on_download_progressed(self, done: int, total: int) -> None:
        if done >= total:  # downloaded: the checks and the test load have no known length
            self.cancel_button.hide()
            self.sentence.setText("Checking the package (signature, files, a test load)…")
            self.progress.setRange(0, 0)
            return
        self.progress.setRange(0, 1000)
        self.progress.setValue(int(done * 1000 / max(total, 1)))
        done_mib, total_mib = fmt.size_number(done, "MiB"), fmt.size_number(total, "MiB")
        self.sentence.setText(f"Downloading… {done_mib} of {total_mib} MiB")

    def _on_cancel_clicked(self) -> None:
        if self._control is not None:
            self._control.cancel()

    def _on_installed(self, backend: InstalledBackend) -> None:
        self.install_button.hide()
        self.update_button.hide()
        self._say(f"Installed the {backend.name} backend; the engine now runs it.")
        self.installed.emit(backend)

    def _on_install_failed(self, message: str, error: BaseException) -> None:
        if isinstance(error, DownloadCancelled):
            message = "The download was cancelled; nothing changed."
        self._say(f"{message} The engine keeps the {self.store.chosen_name()} backend.")

    def _say(self, text: str) -> None:
        self.progress.hide()
        self.cancel_button.hide()
        self.sentence.setText(text)
        self.install_finished.emit(text)

    def _on_busy_changed(self, busy: bool) -> None:
        for button in (self.look_button, self.install_button, self.update_button):
            button.setEnabled(not busy)

    def cancel(self) -> None:
        """Stop a download in flight (the dialog closing)."""
        self._on_cancel_clicked()
