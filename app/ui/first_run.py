"""The first-run dialog: which GPU this machine has, which backend package fits it, and
installing one the user picked (a file, or a URL the user typed), or keeping the built-in one.

Nothing here touches the network unless the user presses "Install from URL…". Detection (a
vulkaninfo run, sysfs reads), the download and the install (hashing, a test load in a child
process) run off the GUI thread through app.services.tasks.TaskRunner, like the Backends page.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.backends.gpu_advice import BUILT_IN, Recommendation, recommend, where_to_get
from app.backends.gpu_detect import Gpu, detect_gpus
from app.backends.install import install_file, install_url
from app.backends.store import BackendStore, InstalledBackend
from app.engine.backend_probe import probe
from app.models.hub.download_control import DownloadCancelled, DownloadControl
from app.platform import units as fmt
from app.services.tasks import TaskRunner
from app.state.settings import SettingsFile
from app.ui.package_offer import DownloadProgress, PackageOffer

Detect = Callable[[], list[Gpu]]


class FirstRunDialog(QDialog):
    """Signals: detection_finished(object): the Recommendation, once it is shown.
    backend_chosen(str): a package was installed and is now the engine's backend.
    install_finished(str): an install ended, well or not; the sentence shown."""

    detection_finished = Signal(object)
    backend_chosen = Signal(str)
    install_finished = Signal(str)

    def __init__(
        self, store: BackendStore, detect: Detect = detect_gpus, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Welcome to KV Studio")
        self.store = store
        self.tasks = TaskRunner(self, max_threads=1)  # one detection or install at a time
        self.recommendation: Recommendation | None = None
        self._control: DownloadControl | None = None
        self._close_when_idle = False
        self._progress = DownloadProgress(self)
        self._progress.progressed.connect(self._on_download_progressed)

        title = QLabel("Choose the llama.cpp backend")
        title.setStyleSheet("font-size: 18px; font-weight: 600;")
        self.gpus = QLabel("Looking for GPUs…")
        self.gpus.setTextFormat(Qt.TextFormat.PlainText)  # device names are not markup
        self.gpus.setWordWrap(True)
        self.advice = QLabel()
        self.advice.setTextFormat(Qt.TextFormat.PlainText)
        self.advice.setWordWrap(True)
        self.advice.setStyleSheet("font-weight: 600;")
        self.needs = QLabel()
        self.needs.setWordWrap(True)
        self.needs.hide()
        self.source = QLabel()  # where the named package comes from, before any file is asked for
        self.source.setTextFormat(Qt.TextFormat.PlainText)
        self.source.setWordWrap(True)
        self.source.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.source.hide()
        self.about = about = QLabel(
            "KV Studio comes with the built-in CPU backend. A GPU backend is a separate package "
            "(.tar.gz), signed by the project: its signature and every file's sha256 are checked "
            "before any of its code runs, then it is test-loaded before the engine uses it. "
            "Nothing is read from the network unless you ask."
        )
        about.setWordWrap(True)
        # the published packages, read only when the user presses its button (consent)
        self.offer = PackageOffer(store, parent=self)
        self.offer.installed.connect(self._on_installed)
        self.offer.install_finished.connect(self._on_offer_finished)
        self.offer.tasks.busy_changed.connect(self._on_busy_changed)
        self.file_button = QPushButton("Install backend from file…")
        self.url = QLineEdit()
        self.url.setPlaceholderText("https://…/kvstudio-backend-<name>-<version>-<platform>.tar.gz")
        self.url_button = QPushButton("Install from URL…")
        self.cancel_button = QPushButton("Cancel download")
        self.cancel_button.hide()
        self.progress = QProgressBar()
        self.progress.hide()
        self.message = QLabel()
        self.message.setTextFormat(Qt.TextFormat.PlainText)  # file names and URLs are not markup
        self.message.setWordWrap(True)
        later = QLabel("You can switch backends later on the Backends page.")
        later.setStyleSheet("color: palette(placeholder-text);")
        self.keep_button = QPushButton("Keep the built-in CPU backend")
        self.keep_button.clicked.connect(self.accept)

        self._lay_out(title, about, later)

        self.file_button.clicked.connect(self._on_file_clicked)
        self.url_button.clicked.connect(lambda: self.install_from_url(self.url.text()))
        self.url.returnPressed.connect(self.url_button.click)
        self.cancel_button.clicked.connect(self._on_cancel_clicked)
        self.tasks.busy_changed.connect(self._on_busy_changed)
        self.tasks.submit(
            "detect",
            detect,
            on_done=self._show_detected,
            on_error=lambda message, _e: self._show_detected([], message),
        )

    def _lay_out(self, title: QLabel, about: QLabel, later: QLabel) -> None:
        url_row = QHBoxLayout()
        url_row.addWidget(self.url, 1)
        url_row.addWidget(self.url_button)
        url_row.addWidget(self.cancel_button)
        bottom = QHBoxLayout()
        bottom.addWidget(later, 1)
        bottom.addWidget(self.keep_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(20, 20, 20, 20)
        layout.setSpacing(10)
        self.title = title
        for widget in (title, self.gpus, self.advice, self.needs, self.source, about, self.offer):
            layout.addWidget(widget)
        layout.addWidget(self.file_button)
        layout.addLayout(url_row)
        layout.addWidget(self.progress)
        layout.addWidget(self.message)
        layout.addStretch(1)
        layout.addLayout(bottom)
        self.setMinimumWidth(680)

    # ---- what was found ----------------------------------------------------------------------

    def _show_detected(self, gpus: list[Gpu], problem: str | None = None) -> None:
        self.recommendation = recommend(gpus)
        found = "\n".join(g.describe() for g in gpus)
        self.gpus.setText(f"Found: {found}" if gpus else (problem or "No GPU found."))
        self.advice.setText(self.recommendation.sentence)
        self.needs.setText(self.recommendation.needs or "")
        self.needs.setVisible(bool(self.recommendation.needs))
        self.offer.set_recommendation(self.recommendation)
        package_needed = self.recommendation.backend != BUILT_IN
        if not package_needed:
            self._just_continue(shown_gpus=bool(gpus or problem))
        else:
            tag = f"{platform.system().lower()}-{platform.machine()}"
            self.source.setText(where_to_get(self.recommendation, tag))
            self.source.show()
        self.adjustSize()  # the wrapped sentences need more height than "Looking for GPUs…"
        self.detection_finished.emit(self.recommendation)

    def _just_continue(self, shown_gpus: bool) -> None:
        """No package to get (no GPU, or Apple's Metal in the built-in backend): the sentence
        and Continue, nothing to install (the Backends page still can)."""
        self.title.setText("Welcome to KV Studio")
        self.gpus.setVisible(shown_gpus)
        for widget in (self.about, self.offer, self.file_button, self.url, self.url_button):
            widget.hide()
        self.keep_button.setText("Continue")
        self.keep_button.setDefault(True)
        self.keep_button.setFocus()

    # ---- installing --------------------------------------------------------------------------

    def _on_file_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self,
            "Install a backend package",
            os.path.expanduser("~"),
            "Backend packages (*.tar.gz);;All files (*)",
        )
        if path:
            self.install_from_file(Path(path))

    def install_from_file(self, archive: Path) -> None:
        self.message.setText(f"Checking {archive.name} (files and a test load)…")
        self._busy_bar()
        self.tasks.submit(
            "install",
            install_file,
            self.store,
            archive,
            probe,
            on_done=self._on_installed,
            on_error=self._on_install_failed,
        )

    def install_from_url(self, url: str) -> None:
        self._control = DownloadControl()
        self.message.setText("Downloading…")
        self.progress.setRange(0, 0)
        self.progress.show()
        self.cancel_button.show()
        self.tasks.submit(
            "install",
            self._download_and_install,
            url,
            self._control,
            on_done=self._on_installed,
            on_error=self._on_install_failed,
        )

    def _download_and_install(self, url: str, control: DownloadControl) -> InstalledBackend:
        """On the worker thread: download, then check and load (the bar turns busy)."""
        return install_url(
            self.store, url, probe, control=control, on_progress=self._progress.progressed.emit
        )

    def _on_download_progressed(self, done: int, total: int) -> None:
        if done >= total:  # downloaded: the check and the test load have no known length
            self.cancel_button.hide()
            self.message.setText("Checking the package (files and a test load)…")
            self._busy_bar()
            return
        self.progress.setRange(0, 1000)
        self.progress.setValue(int(done * 1000 / max(total, 1)))
        done_mib, total_mib = fmt.size_number(done, "MiB"), fmt.size_number(total, "MiB")
        self.message.setText(f"Downloading… {done_mib} of {total_mib} MiB")

    def _busy_bar(self) -> None:
        self.progress.setRange(0, 0)
        self.progress.show()

    def _on_cancel_clicked(self) -> None:
        if self._control is not None:
            self._control.cancel()

    def _on_installed(self, backend: InstalledBackend) -> None:
        self._say(f"Installed the {backend.name} backend; the engine now runs it.")
        self.keep_button.setText("Done")
        self.backend_chosen.emit(backend.name)

    def _on_offer_finished(self, text: str) -> None:
        """An index read or an install from the index ended: the offer shows its sentence."""
        self.message.setText("")
        self.adjustSize()
        self.install_finished.emit(text)

    def _on_install_failed(self, message: str, error: BaseException) -> None:
        if isinstance(error, DownloadCancelled):
            message = "The download was cancelled; nothing changed."
        chosen = self.store.chosen_name()
        self._say(f"{message} The engine keeps the {chosen} backend.")

    def _say(self, text: str) -> None:
        self.progress.hide()
        self.cancel_button.hide()
        self.message.setText(text)
        self.adjustSize()
        self.install_finished.emit(text)

    def _on_busy_changed(self, _busy: bool) -> None:
        busy = self.tasks.is_busy() or self.offer.tasks.is_busy()
        for button in (self.file_button, self.url_button, self.keep_button):
            button.setEnabled(not busy)
        self.url.setEnabled(not busy)
        if not busy and self._close_when_idle:
            super().reject()

    def reject(self) -> None:
        """Escape or the close button. During an install the dialog waits for it to end (a
        download is cancelled; a check or test load finishes), so its answer is not lost."""
        if not self.tasks.is_busy() and not self.offer.tasks.is_busy():
            super().reject()
            return
        self._close_when_idle = True
        self.offer.cancel()
        if self._control is not None:
            self._control.cancel()


def offer_first_run(
    window: QWidget,
    store: BackendStore,
    settings: SettingsFile,
    *,
    detect: Detect = detect_gpus,
) -> FirstRunDialog | None:
    """Open the dialog over `window` (window-modal, not blocking the event loop) unless it was
    shown before; it is marked shown at once, so a user who closes it is not asked again."""
    if settings.settings.first_run_done:
        return None
    settings.update(first_run_done=True)
    dialog = FirstRunDialog(store, detect, window)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.open()
    return dialog
