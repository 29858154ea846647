"""The Models page: Discover (search the Hub, open a repo, fit estimates), Downloads, My models.

    page = ModelsPage(data_dir, bridge)
    page.load_requested.connect(chat_page.load_model)   # the one place a load is prepared

Everything that touches the network or reads GGUF headers runs off the GUI thread
(TaskRunner for short calls, DownloadManager's pool for downloads).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QCoreApplication, Qt, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QPushButton,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.engine.messages import Finished, Loaded
from app.kv.fit_estimator import FitEstimator
from app.load.fit_speed import kv_bytes_in_use, measured_bandwidth
from app.models.download_queue import DEFAULT_MAX_PARALLEL, QUEUE_FILE
from app.models.hub import (
    GgufEntry,
    RepoFiles,
    clear_header_cache,
    list_gguf_files,
    search_models,
)
from app.models.hub.curated_models import CuratedModel
from app.models.library import LibraryModel, list_models
from app.models.library_delete import delete_model
from app.models.model_folders import ModelFolders
from app.platform.errors import AppError, GatedRepoError
from app.platform.probes import FreeMemory, read_free_memory
from app.services.downloads import DownloadManager
from app.services.engine_client import EngineClient
from app.services.engine_events import listen_to_engine
from app.services.message_bridge import MessageBridge
from app.services.tasks import TaskRunner
from app.state.settings import DEFAULT_CONTEXT
from app.ui.models.downloads_view import DownloadsView
from app.ui.models.library_view import LibraryView
from app.ui.models.repo_view import RepoView
from app.ui.models.search_view import SearchView
from app.ui.models.token_dialog import TokenDialog

log = logging.getLogger(__name__)

_CHOOSE = "choose"  # the destination list's last item opens a folder dialog
# The page's own touches on top of the app style (assets/style.qss): the primary actions
# in the app's accent colour, a splitter gap instead of a hairline.
PAGE_STYLE = """
QPushButton#primaryButton { background: #2f6fdb; color: white; border: none; border-radius: 6px;
    padding: 5px 16px; font-weight: 600; }
QPushButton#primaryButton:hover { background: #285fc0; }
QPushButton#primaryButton:disabled { background: rgba(47, 111, 219, 0.35);
    color: rgba(255, 255, 255, 0.6); }
QSplitter::handle { background: transparent; }
QLabel#repoTitle { font-size: 13pt; font-weight: 700; }
"""


class ModelsPage(QWidget):
    """Find, fit-check, download and manage GGUF models.

    Signals:
        load_requested(str ref): the user chose 'Load into chat' on a model (ref: its path,
            or 'starter'); the chat page loads it with the user's load options.
        download_finished(str path): a model finished downloading (it is in My models).
    """

    load_requested = Signal(str)
    download_finished = Signal(str)

    TAB_DISCOVER, TAB_DOWNLOADS, TAB_LIBRARY = 0, 1, 2

    def __init__(
        self,
        data_dir: Path,
        bridge: MessageBridge | None = None,
        *,
        max_parallel: int = DEFAULT_MAX_PARALLEL,
        budget_fn: Callable[[], FreeMemory] = read_free_memory,
        default_context: int = DEFAULT_CONTEXT,
        engine: EngineClient | None = None,
        parent: QWidget | None = None,
    ) -> None:
        """`data_dir`: the app's data folder (model folders, the saved download queue).
        `bridge`: where errors and notes go (optional). `budget_fn()`: the memory fit
        verdicts compare against (default: free VRAM, else free RAM). `default_context`: the
        context the fit estimates start at (the user's default load setting). `engine`: whose
        loaded model My models marks (optional)."""
        super().__init__(parent)
        self.bridge = bridge
        self._shut_down = False
        self._loaded: Loaded | None = None  # the engine's model: its decodes measure bandwidth
        self._last_destination: Path | None = None
        self.runner = TaskRunner(self)
        self.folders = ModelFolders(data_dir)
        self.fit_estimator = FitEstimator(budget_fn=budget_fn)
        self.downloads = DownloadManager(
            self.folders, state_file=data_dir / QUEUE_FILE, max_parallel=max_parallel, parent=self
        )

        self._build_views(default_context)
        self._lay_out()
        self._connect(engine)
        self._fill_destinations(self.folders.read().download_to)
        self._last_destination = self.download_folder()
        self.repo_view.destination_combo.activated.connect(self._on_destination_activated)
        self.downloads.restore()
        self.library_view.refresh()
        self._update_tab_titles()
        app = QCoreApplication.instance()
        if app is not None:  # quitting pauses downloads (kept on disk) instead of waiting for them
            app.aboutToQuit.connect(self.shutdown)

    # ---- building ----------------------------------------------------------------------

    def _build_views(self, default_context: int) -> None:
        self.search_view = SearchView(
            lambda query, sort, chat_only: search_models(query, sort=sort, chat_only=chat_only),
            self.runner,
            self.fit_estimator.curated,
            default_context=default_context,
        )
        self.repo_view = RepoView(
            list_gguf_files, self.fit_estimator, self.runner, default_context=default_context
        )
        self.downloads_view = DownloadsView(self.downloads)
        self.library_view = LibraryView(
            lambda: list_models(folders=self.folders),
            delete_model,
            self.folders.add_folder,
            self.runner,
        )

    def _lay_out(self) -> None:
        """Discover (search beside the repo), Downloads and My models as tabs."""
        discover = QSplitter(Qt.Orientation.Horizontal)
        discover.addWidget(self.search_view)
        discover.addWidget(self.repo_view)
        # The repo view (file names, four columns of verdicts) gets the larger share.
        discover.setStretchFactor(0, 1)
        discover.setStretchFactor(1, 2)
        discover.setChildrenCollapsible(False)
        discover.setHandleWidth(12)
        discover.setSizes([400, 880])
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(discover, "Discover")
        self.tabs.addTab(self.downloads_view, "Downloads")
        self.tabs.addTab(self.library_view, "My models")
        self.token_button = QPushButton("Hugging Face token…")
        self.token_button.setFlat(True)
        self.token_button.setToolTip("Add or replace the access token for gated and private models")
        self.token_button.clicked.connect(lambda: self._on_token_requested(""))
        self.tabs.setCornerWidget(self.token_button, Qt.Corner.TopRightCorner)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 10, 12, 10)
        layout.addWidget(self.tabs)
        self.setStyleSheet(PAGE_STYLE)

    def _connect(self, engine: EngineClient | None) -> None:
        self.search_view.repo_activated.connect(self._on_search_repo_activated)
        self.repo_view.download_requested.connect(self._on_repo_download_requested)
        self.repo_view.token_requested.connect(self._on_token_requested)
        self.downloads.download_finished.connect(self._on_download_finished)
        self.downloads.download_failed.connect(self._on_download_failed)
        for signal in (
            self.downloads.download_added,
            self.downloads.download_changed,
            self.downloads.download_removed,
        ):
            signal.connect(self._on_download_list_changed)  # bound: dropped with the page
        self.library_view.load_requested.connect(self.load_requested)
        self.downloads_view.load_requested.connect(self.load_requested)  # the library's path
        if engine is not None:
            listen_to_engine(engine, self)
            if engine.loaded is not None:
                self.on_engine_model_loaded(engine.loaded)

    # ---- public ------------------------------------------------------------------------

    def search(self, query: str) -> None:
        self.tabs.setCurrentIndex(self.TAB_DISCOVER)
        self.search_view.query_edit.setText(query)
        self.search_view.search()

    def show_recommended(self) -> None:
        """Discover with the recommended small chat models in view (the chat page's "Find a
        chat model"): names, sizes, licences and fit for this machine, without the network."""
        self.tabs.setCurrentIndex(self.TAB_DISCOVER)
        self.search_view.show_recommended()

    def download_recommended(self, model: CuratedModel) -> None:
        """Download a recommended model's file with one click (the chat page's offer for a
        base model): its repo's file list is read off the GUI thread, the file is queued, and
        the Downloads tab shows it, with Load into chat when it is there."""
        self.tabs.setCurrentIndex(self.TAB_DOWNLOADS)

        def on_listed(files: RepoFiles) -> None:
            entry = next((e for e in files.entries if e.first_file == model.file), None)
            if entry is None:
                self._on_recommended_failed(f"{model.file} is no longer in {model.repo_id}")
                return
            self.downloads_view.select(self.downloads.enqueue(entry, self.download_folder()))

        self.runner.submit(
            f"recommended:{model.repo_id}",
            list_gguf_files,
            model.repo_id,
            on_done=on_listed,
            on_error=lambda message, _error: self._on_recommended_failed(message),
        )

    def _on_recommended_failed(self, reason: str) -> None:
        if self.bridge is not None:
            self.bridge.warning(f"The download could not start: {reason.rstrip('.')}.")

    def shutdown(self) -> None:
        """Pause running downloads (kept on disk, continued at the next start) and wait.
        Called on QApplication.aboutToQuit; safe to call more than once."""
        if self._shut_down:
            return
        self._shut_down = True
        self.downloads.shutdown()
        self.library_view.starter_offer.download.shutdown()
        self.runner.wait(5000)

    def download_folder(self) -> Path | None:
        """Where the next download goes (None: the Hugging Face cache)."""
        data = self.repo_view.destination_combo.currentData()
        return Path(data) if data and data != _CHOOSE else None

    def set_download_folder(self, folder: Path | None) -> None:
        """Send downloads to `folder` (None: the HF cache), remembered for the next start."""
        self.folders.choose_download_folder(folder)
        self._fill_destinations(folder)

    # ---- slots -------------------------------------------------------------------------

    def _on_search_repo_activated(self, repo_id: str) -> None:
        self.fit_estimator.refresh_budget()  # free memory changes; read it again per repo
        self.repo_view.open_repo(repo_id)

    def on_engine_model_loaded(self, loaded: Loaded) -> None:
        self.library_view.set_loaded_path(Path(loaded.model_path))
        self._loaded = loaded

    def on_engine_reply_finished(self, finished: Finished) -> None:
        """A real decode: its speed times the bytes it read per token is this machine's
        bandwidth, which the fit badges' speeds rest on from now on."""
        loaded = self._loaded
        if loaded is None or finished.generated_tokens < 2:
            return
        try:
            weights = Path(loaded.model_path).stat().st_size
        except OSError:
            return
        kv = kv_bytes_in_use(((c.total_bytes, c.cells) for c in loaded.kv_caches), finished.n_past)
        on_gpu = loaded.options.n_gpu_layers != 0 and self.fit_estimator.budget().on_gpu
        name = Path(loaded.model_path).name.removesuffix(".gguf")
        bandwidth = measured_bandwidth(finished.tokens_per_second, weights, kv, on_gpu, name)
        if bandwidth is not None:
            self.repo_view.set_measured_bandwidth(bandwidth)
            self.search_view.recommended.set_measured_bandwidth(bandwidth)

    def on_engine_model_unloaded(self) -> None:
        self.library_view.set_loaded_path(None)
        self._loaded = None  # the bandwidth it measured stays: the machine is the same

    def _fill_destinations(self, current: Path | None) -> None:
        combo = self.repo_view.destination_combo
        combo.blockSignals(True)
        combo.clear()
        combo.addItem("Hugging Face cache", None)
        folders = list(self.folders.read().download_folders)
        if current is not None and Path(current) not in folders:
            folders = [Path(current), *folders]
        for folder in folders:
            combo.addItem(str(folder), str(folder))
        combo.addItem("Choose folder…", _CHOOSE)
        index = combo.findData(str(current)) if current is not None else 0
        combo.setCurrentIndex(max(0, index))
        combo.blockSignals(False)

    def _on_destination_activated(self, index: int) -> None:
        combo = self.repo_view.destination_combo
        if combo.itemData(index) == _CHOOSE:
            folder = QFileDialog.getExistingDirectory(self, "Download models to")
            self.set_download_folder(Path(folder) if folder else self._last_destination)
        else:
            self.set_download_folder(self.download_folder())
        self._last_destination = self.download_folder()

    def _on_repo_download_requested(self, entry: GgufEntry) -> None:
        key = self.downloads.enqueue(entry, self.download_folder())
        self.tabs.setCurrentIndex(self.TAB_DOWNLOADS)
        self.downloads_view.select(key)

    def _on_download_finished(self, _key: str, model: LibraryModel) -> None:
        self.library_view.add_model(model)
        self.download_finished.emit(str(model.path))
        if self.bridge is not None:
            self.bridge.info(f"Downloaded {model.path.name}; it is in My models.")

    def _on_download_failed(self, _key: str, error: AppError) -> None:
        if self.bridge is not None:
            self.bridge.warning(str(error))
        if isinstance(error, GatedRepoError):
            self._on_token_requested(str(error))

    def _on_token_requested(self, reason: str = "") -> None:
        dialog = TokenDialog(reason or "", self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.accepted.connect(self._on_token_saved)
        dialog.open()
        self.token_dialog = dialog  # tests reach it here

    def _on_token_saved(self) -> None:
        if self.bridge is not None:
            self.bridge.info("Hugging Face token saved.")
        self.read_headers_again()

    def read_headers_again(self) -> None:
        """The Hugging Face token changed (here or on the Settings page): headers that failed,
        or were read, with the old one are read again."""
        clear_header_cache()  # a file that failed before may open with the new token
        self.fit_estimator.forget_headers()
        self.repo_view.reload()

    def set_default_context(self, n_ctx: int) -> None:
        """The fit estimates follow the default load context, as the next load dialog does."""
        self.repo_view.context_spin.setValue(n_ctx)

    def _on_download_list_changed(self, _key: str) -> None:
        self._update_tab_titles()

    def _update_tab_titles(self) -> None:
        active = sum(1 for i in self.downloads.items() if i.is_active)
        self.tabs.setTabText(self.TAB_DOWNLOADS, f"Downloads ({active})" if active else "Downloads")
