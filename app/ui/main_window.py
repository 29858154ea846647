"""The main window: a sidebar of pages (Chat, Models, Dashboard), a status bar, and the
message bridge shown as status-bar notes and (for errors) a message box."""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent, QIcon
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QMessageBox,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.chats.store import ChatStore
from app.services.engine_client import EngineClient
from app.services.message_bridge import MessageBridge
from app.state.settings import SettingsFile
from app.ui.chat.chat_menus import ChatMenus
from app.ui.chat.chat_page import ChatPage

log = logging.getLogger(__name__)

ASSETS = Path(__file__).resolve().parents[2] / "assets"
INFO_MS = 6000
MINIMUM_SIZE = QSize(1024, 640)  # the README's promise


def app_icon() -> QIcon:
    return QIcon(str(ASSETS / "icon.svg"))


class MainWindow(QMainWindow):
    """Signals:
    closed(): the window was closed (its error boxes are closed too, so the app quits).
    """

    closed = Signal()

    def __init__(
        self,
        engine_client: EngineClient,
        store: ChatStore,
        settings: SettingsFile,
        bridge: MessageBridge,
    ) -> None:
        super().__init__()
        self.setWindowTitle("KV Studio")
        self.setWindowIcon(app_icon())
        self.engine_client, self.store, self.settings, self.bridge = (
            engine_client,
            store,
            settings,
            bridge,
        )
        self.nav = QListWidget()
        self.nav.setObjectName("pageNav")
        self.nav.setFixedWidth(104)
        self.nav.setIconSize(QSize(20, 20))
        self.pages = QStackedWidget()
        brand = QLabel("KV Studio")
        brand.setObjectName("brand")
        brand.setAlignment(Qt.AlignmentFlag.AlignCenter)
        sidebar = QFrame()
        sidebar.setObjectName("sidebar")
        side_layout = QVBoxLayout(sidebar)
        side_layout.setContentsMargins(0, 12, 0, 12)
        side_layout.addWidget(brand)
        side_layout.addWidget(self.nav, 1)
        central = QWidget()
        layout = QHBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(sidebar)
        layout.addWidget(self.pages, 1)
        self.setCentralWidget(central)
        self.nav.currentRowChanged.connect(self.pages.setCurrentIndex)

        self.chat = ChatPage(engine_client, store, settings, bridge)
        self.add_page("Chat", self.chat)
        self.chat_menus = ChatMenus(self, self.chat)
        self.statusBar().addPermanentWidget(self.chat.status)
        self.statusBar().setSizeGripEnabled(False)
        self.last_error_box: QMessageBox | None = None
        self._closing = False
        bridge.error_reported.connect(self._on_bridge_error_reported)
        bridge.warning_reported.connect(self._on_bridge_warning_reported)
        bridge.info_reported.connect(self._on_bridge_info_reported)
        self._window_settings = QSettings(
            str(settings.folder / "window.ini"), QSettings.Format.IniFormat
        )
        geometry = self._window_settings.value("geometry")
        if isinstance(geometry, QByteArray) and not geometry.isEmpty():
            self.restoreGeometry(geometry)
        else:
            self.resize(1280, 820)
        self.setMinimumSize(MINIMUM_SIZE)  # every page is laid out for it (tests/ui/test_layouts)
        if settings.notice:
            QTimer.singleShot(0, lambda: bridge.warning(settings.notice or ""))

    def add_page(self, title: str, widget: QWidget) -> None:
        """Add a page to the sidebar (Models and Dashboard are added by app/gui.py)."""
        self.pages.addWidget(widget)
        item = QListWidgetItem(title)
        item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
        item.setSizeHint(QSize(96, 44))
        self.nav.addItem(item)
        if self.nav.currentRow() < 0:
            self.nav.setCurrentRow(0)

    def show_page(self, title: str) -> None:
        for row in range(self.nav.count()):
            if self.nav.item(row).text() == title:
                self.nav.setCurrentRow(row)

    def _on_bridge_error_reported(self, text: str) -> None:
        if self._closing:  # already logged by the bridge; a box now would keep the app alive
            return
        first_line = text.splitlines()[0] if text else ""
        # The box says it whole until dismissed; a status line would cut a long sentence off.
        self.statusBar().clearMessage()
        box = QMessageBox(
            QMessageBox.Icon.Warning, "KV Studio", first_line, QMessageBox.StandardButton.Ok, self
        )
        box.setTextFormat(Qt.TextFormat.PlainText)  # errors may quote a file's own text
        if "\n" in text:
            box.setDetailedText(text)
        box.setWindowModality(Qt.WindowModality.WindowModal)
        box.open()  # not exec(): the window (and its streaming) keeps running
        self.last_error_box = box

    def _on_bridge_warning_reported(self, text: str) -> None:
        self.statusBar().showMessage(f"⚠ {text.splitlines()[0] if text else ''}", INFO_MS * 2)

    def _on_bridge_info_reported(self, text: str) -> None:
        self.statusBar().showMessage(text, INFO_MS)

    def closeEvent(self, event: QCloseEvent) -> None:
        self._closing = True
        if self.last_error_box is not None:
            self.last_error_box.close()
        self._window_settings.setValue("geometry", self.saveGeometry())
        self._window_settings.sync()
        self.chat.settings_panel.flush()
        self.chat.session.close()
        super().closeEvent(event)
        self.closed.emit()
