"""Open the KV Studio window: `kvstudio` / `kvstudio gui --model starter`."""

from __future__ import annotations

import logging
import os
import signal
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from app.backends.gpu_detect import detect_gpus
from app.backends.store import BackendStore
from app.chats.rescue import open_chats
from app.chats.store import ChatStore
from app.damaged_files import check_state_files
from app.models.hub.curated_models import CuratedModel
from app.platform.app_log import start_log_file
from app.platform.heap import give_memory_back, steady_heap
from app.platform.paths import APP_NAME, ORGANIZATION, chat_db_path, data_dir
from app.platform.window_check import utf8_locale
from app.services.engine_client import EngineClient
from app.services.gui_garbage import GuiThreadGarbageCollector
from app.services.local_server import LocalServerService
from app.services.message_bridge import MessageBridge
from app.state.instance_lock import InstanceLock
from app.state.settings import SettingsFile
from app.ui.backends_page import BackendsPage
from app.ui.crash_dialog import CrashDialogs
from app.ui.dashboard.page import DashboardPage
from app.ui.first_run import Detect, FirstRunDialog, offer_first_run
from app.ui.main_window import MainWindow, app_icon
from app.ui.models.page import ModelsPage
from app.ui.screenshot import save_when_ready
from app.ui.server_page import ServerPage
from app.ui.settings_page import SettingsPage
from app.ui.theme import ThemeController

log = logging.getLogger(__name__)


@dataclass
class Pages:
    """The pages beside Chat that the app itself talks to (closing, the first run, the theme)."""

    models: ModelsPage
    dashboard: DashboardPage
    backends: BackendsPage
    server: LocalServerService
    theme: ThemeController


@dataclass
class AppParts:
    window: MainWindow
    pages: Pages
    engine: EngineClient
    store: ChatStore
    settings: SettingsFile
    bridge: MessageBridge
    crash: CrashDialogs | None = None
    instance: InstanceLock | None = None
    notices: tuple[str, ...] = ()  # what the start had to tell the user (shown as messages)
    garbage: GuiThreadGarbageCollector | None = None

    def close(self) -> None:
        """Stop the server, the dashboard's sampling, the engine and close the database (after
        the window has closed)."""
        self.pages.server.stop()
        self.pages.dashboard.shutdown()  # its sampler thread would outlive the window
        self.engine.shutdown()
        self.window.chat.local_workers.stop_all()  # after the engine that used them
        self.store.close()
        if self.instance is not None:
            self.instance.release()
        if self.crash is not None:
            self.crash.uninstall()
        if self.garbage is not None:
            self.garbage.stop()


def build_app(folder: Path, engine: EngineClient | None = None) -> AppParts:
    """The main window and what it runs on, for the data folder `folder`. Damaged state files
    and a damaged or locked conversations file never stop it: each costs one message."""
    steady_heap()  # the window lives for days: app/platform/heap.py says why
    garbage = GuiThreadGarbageCollector()
    crash = CrashDialogs(folder)
    crash.install()
    notices = check_state_files(folder)
    instance = InstanceLock(folder)
    chats = open_chats(chat_db_path(folder), other_pid=instance.other_pid)
    notices += [chats.notice] if chats.notice else []
    store = chats.store
    if instance.owned:
        # Only the first window: a second one would cut off the first one's streaming reply.
        interrupted = store.mark_interrupted()
        if interrupted:
            log.info("%d reply(ies) were cut off by a crash; kept as 'interrupted'", interrupted)
    elif instance.other_pid and chats.saved:
        notices.append(
            f"Another KV Studio (process {instance.other_pid}) is open on these conversations; "
            "both save to them, and each shows the other's new messages after a restart."
        )
    settings = SettingsFile(folder)
    bridge = MessageBridge()
    engine = engine or EngineClient()
    engine.model_unloaded.connect(give_memory_back)  # what the GUI held for that model
    window = MainWindow(engine, store, settings, bridge)
    crash.window = window
    pages = _add_pages(window, engine, bridge, folder)
    for notice in notices:
        QTimer.singleShot(0, partial(bridge.error, notice))
    garbage.setParent(window)
    return AppParts(
        window, pages, engine, store, settings, bridge, crash, instance, tuple(notices), garbage
    )


def _add_pages(
    window: MainWindow, engine: EngineClient, bridge: MessageBridge, folder: Path
) -> Pages:
    """The Models and Dashboard pages beside Chat. Load into chat goes through the chat
    page (the one place a load is prepared from the settings), so the load shows its
    progress there and the model is remembered."""
    # Fit estimates start at the default load context, as the chat's load dialog does.
    models = ModelsPage(
        folder, bridge, default_context=window.chat.settings.settings.n_ctx, engine=engine
    )
    models.load_requested.connect(window.chat.load_model)
    models.load_requested.connect(lambda _ref: window.show_page("Chat"))
    window.add_page("Models", models)

    def find_chat_model() -> None:
        window.show_page("Models")
        models.show_recommended()  # Discover, with the small chat models to start with

    window.chat.find_chat_model_requested.connect(find_chat_model)

    def download_chat_model(model: CuratedModel) -> None:
        window.show_page("Models")
        models.download_recommended(model)  # its Downloads tab shows the progress

    window.chat.chat_model_download_requested.connect(download_chat_model)
    dashboard = DashboardPage(engine)
    window.add_page("Dashboard", dashboard)
    backends = BackendsPage(BackendStore(folder, window.chat.settings))
    backends.backend_switched.connect(lambda _name: engine.restart_engine())
    window.add_page("Backends", backends)
    # API requests go through the chat's EngineClient: one queue, one engine
    server = LocalServerService(engine, window)
    window.add_page("Server", ServerPage(server))
    theme = ThemeController(window.settings, window)
    settings = SettingsPage(window.settings, folder, theme, backends)
    settings.token_changed.connect(models.read_headers_again)
    settings.model_folders_changed.connect(models.library_view.refresh)
    settings.backends_page_requested.connect(lambda: window.show_page("Backends"))
    settings.load_defaults.defaults_saved.connect(
        lambda chosen: models.set_default_context(chosen.n_ctx)
    )
    window.add_page("Settings", settings)
    return Pages(models, dashboard, backends, server, theme)


def offer_first_run_dialog(parts: AppParts, detect: Detect = detect_gpus) -> FirstRunDialog | None:
    """The first-run dialog over the window, unless it was shown before. A backend installed
    there restarts the engine on it and shows up on the Backends page."""
    dialog = offer_first_run(
        parts.window,
        BackendStore(parts.settings.folder, parts.settings),
        parts.settings,
        detect=detect,
    )
    if dialog is not None:
        dialog.backend_chosen.connect(lambda _name: parts.engine.restart_engine())
        dialog.backend_chosen.connect(lambda _name: parts.pages.backends.refresh())
    return dialog


def send_when_loaded(window: MainWindow, engine: EngineClient, text: str) -> None:
    """Type `text` into the chat's input and press Send once the first model has loaded
    (`kvstudio --send`): the reply runs exactly as if the user had typed it."""

    def on_loaded(_loaded: object) -> None:
        engine.model_loaded.disconnect(on_loaded)
        window.chat.input.setPlainText(text)
        window.chat.send_button.click()
        log.info("sent the --send message")

    engine.model_loaded.connect(on_loaded)


def open_app(
    model: str | None = None, send: str | None = None, screenshot: Path | None = None
) -> int:
    """Run the app until its window closes. `model`: a .gguf path or 'starter' to load;
    `send`: a message to send in the chat once it has loaded; `screenshot`: save the window
    there once that is done, and quit."""
    os.environ.update(utf8_locale(os.environ))  # before Qt reads the locale: no warning
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(sys.argv)
    app.setApplicationName(APP_NAME)
    app.setOrganizationName(ORGANIZATION)
    app.setWindowIcon(app_icon())
    folder = data_dir()  # the folder Qt names for this app, shared with the CLI
    start_log_file(
        folder, BackendStore(folder).chosen_name()
    )  # the GUI has no terminal; the CLI logs to stderr only
    parts = build_app(folder)
    parts.pages.theme.apply()  # the remembered light, dark or the system's, before the window shows
    parts.window.show()
    if model is None and send is None and screenshot is None:
        # Only at a plain start: a start with --model, --send or --screenshot is scripted (the
        # CLI, CI's smoke run), where a dialog would wait for a click nobody makes and a backend
        # installed mid-load would restart the load. The flag stays unset for the next start.
        offer_first_run_dialog(parts)
    if screenshot is not None:
        save_when_ready(
            app,
            parts.window,
            parts.engine,
            screenshot,
            wait_for_model=bool(model),
            wait_for_reply=bool(model and send),
        )
    if send:
        send_when_loaded(parts.window, parts.engine, send)
    if model:
        parts.window.chat.load_model(model)
    # Ctrl+C / SIGTERM close the window cleanly (replies kept, engine stopped). Python
    # only runs signal handlers between bytecodes, so a timer wakes it up regularly.
    previous = {
        sig: signal.signal(sig, lambda *_a: parts.window.close())
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    wake = QTimer(app)
    wake.timeout.connect(lambda: None)
    wake.start(250)
    try:
        return int(app.exec())
    finally:
        wake.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        parts.close()
