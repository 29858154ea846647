"""The app's look: light (assets/style.qss), dark (assets/style-dark.qss) or the system's.

Each look is a stylesheet and a matching palette: the stylesheet names the app's own widgets,
the palette covers everything it does not (dialogs, menus, tooltips, spin boxes) and the
`palette(...)` colours pages use in their own styles. The colours no style sheet reaches
(rich text, charts, the chat's painted messages) are in app/ui/theme_colours.py. "Follow the
system" reads Qt's colour scheme (QStyleHints.colorScheme, Qt 6.5+) and follows its
colorSchemeChanged signal.

    theme = ThemeController(settings)   # app/gui.py, once per window
    theme.apply()                       # at start: the remembered choice
    theme.choose("dark")                # the Settings page: remembered, shown at once
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

from app.platform.errors import BadInputError
from app.state.settings import THEMES, SettingsFile
from app.ui.main_window import ASSETS
from app.ui.theme_colours import DARK, LIGHT, TEXT_COLOURS, scheme_of

log = logging.getLogger(__name__)

SYSTEM = "system"
# What the Settings page offers, in the user's words, in THEMES' order.
THEME_LABELS = {LIGHT: "Light", DARK: "Dark", SYSTEM: "Follow the system"}
STYLESHEETS = {LIGHT: ASSETS / "style.qss", DARK: ASSETS / "style-dark.qss"}

# The dark palette: the same colours as style-dark.qss, so a widget the stylesheet does not
# name matches the ones it does.
_DARK_COLOURS = {
    QPalette.ColorRole.Window: "#16181d",
    QPalette.ColorRole.WindowText: "#e3e6eb",
    QPalette.ColorRole.Base: "#1f2229",
    QPalette.ColorRole.AlternateBase: "#252932",
    QPalette.ColorRole.Text: "#e3e6eb",
    QPalette.ColorRole.Button: "#262a33",
    QPalette.ColorRole.ButtonText: "#e3e6eb",
    QPalette.ColorRole.BrightText: "#ffffff",
    QPalette.ColorRole.Highlight: "#2f6fdb",
    QPalette.ColorRole.HighlightedText: "#ffffff",
    QPalette.ColorRole.Link: "#7aa7f5",
    QPalette.ColorRole.LinkVisited: "#b49cf0",
    QPalette.ColorRole.ToolTipBase: "#262a33",
    QPalette.ColorRole.ToolTipText: "#e3e6eb",
    QPalette.ColorRole.PlaceholderText: "#8b93a1",
    QPalette.ColorRole.Light: "#3a404c",
    QPalette.ColorRole.Midlight: "#30353f",
    QPalette.ColorRole.Mid: "#8b93a1",  # pages write hints in palette(mid): it must be legible
    QPalette.ColorRole.Dark: "#0f1115",
    QPalette.ColorRole.Shadow: "#000000",
}
_DARK_DISABLED = "#6b7280"
# The light look is Qt's standard palette with a darker selection: white on Fusion's #308cc6
# is 3.5:1, under the 4.5:1 text needs (WCAG AA); on #2563eb it is 5.2:1.
_LIGHT_HIGHLIGHT = "#2563eb"


def shown_scheme() -> str:
    """The look on screen now, read from the app's palette (light when there is no app)."""
    app = QApplication.instance()
    if not isinstance(app, QApplication):
        return LIGHT
    return scheme_of(app.palette())


def text_colour(name: str) -> str:
    """The colour `name` ("good", "error", "hint", a chart marker's kind...) in the shown look."""
    return TEXT_COLOURS[shown_scheme()][name]


def scheme_for(choice: str, system: Qt.ColorScheme) -> str:
    """The look to show, "light" or "dark", for a choice and the system's scheme. A system
    that does not say (Qt.ColorScheme.Unknown: no desktop setting, the offscreen platform)
    gets the light look, the app's look before themes existed."""
    if choice == SYSTEM:
        return DARK if system == Qt.ColorScheme.Dark else LIGHT
    return DARK if choice == DARK else LIGHT


def dark_palette() -> QPalette:
    palette = QPalette()
    for role, colour in _DARK_COLOURS.items():
        palette.setColor(role, QColor(colour))
    for role in (
        QPalette.ColorRole.WindowText,
        QPalette.ColorRole.Text,
        QPalette.ColorRole.ButtonText,
    ):
        palette.setColor(QPalette.ColorGroup.Disabled, role, QColor(_DARK_DISABLED))
    return palette


def light_palette(app: QApplication) -> QPalette:
    palette = app.style().standardPalette()
    palette.setColor(QPalette.ColorRole.Highlight, QColor(_LIGHT_HIGHLIGHT))
    palette.setColor(QPalette.ColorRole.HighlightedText, QColor("#ffffff"))
    return palette


def show_scheme(app: QApplication, scheme: str) -> None:
    """Put the light or dark stylesheet and palette on the whole app."""
    app.setPalette(dark_palette() if scheme == DARK else light_palette(app))
    sheet = STYLESHEETS[DARK if scheme == DARK else LIGHT]
    try:
        # Images in the sheet (the dark spin-box arrows) are named from the assets folder.
        text = sheet.read_text(encoding="utf-8")
        app.setStyleSheet(text.replace("url(ASSETS/", f"url({ASSETS.as_posix()}/"))
    except OSError as error:  # a damaged install still runs, in Qt's plain look
        log.warning("The %s stylesheet cannot be read (%s).", scheme, error.strerror or error)
        app.setStyleSheet("")


class ThemeController(QObject):
    """The chosen theme (a setting), shown on the app and, for "system", kept in step with
    the system's colour scheme.

    Signals:
        scheme_shown(str): "light" or "dark" was just put on the app.
    """

    scheme_shown = Signal(str)

    def __init__(self, settings: SettingsFile, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._settings = settings
        self.scheme = LIGHT  # what is on screen once apply() has run
        QGuiApplication.styleHints().colorSchemeChanged.connect(self._on_system_scheme_changed)

    @property
    def choice(self) -> str:
        return self._settings.settings.theme

    def choose(self, choice: str) -> None:
        """Remember `choice` ("light", "dark", "system") and show it now."""
        if choice not in THEMES:
            raise BadInputError(f"There is no '{choice[:40]}' theme; choose light, dark or system.")
        if choice != self.choice:
            self._settings.update(theme=choice)
            log.info("theme: %s", choice)
        self.apply()

    def apply(self, system: Qt.ColorScheme | None = None) -> None:
        """Show the remembered choice; `system`: the system's scheme when it just changed
        (else read from Qt)."""
        app = QApplication.instance()
        if not isinstance(app, QApplication):
            return
        if system is None:
            system = QGuiApplication.styleHints().colorScheme()
        self.scheme = scheme_for(self.choice, system)
        show_scheme(app, self.scheme)
        self.scheme_shown.emit(self.scheme)

    def _on_system_scheme_changed(self, scheme: Qt.ColorScheme) -> None:
        if self.choice == SYSTEM:
            self.apply(scheme)
