"""Where the chat page's widgets go: conversations on the left, the header (picker, Chat
settings), the engine-stopped notice, then the conversation with its offers and input, or the
completion panel for a base model, and the per-chat settings on the right."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QSplitter,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.ui.theme_colours import TEXT_COLOURS, scheme_of


def empty_state_html(scheme: str) -> str:
    """The empty chat's words in the colours of the look `scheme` ("light" or "dark")."""
    words = TEXT_COLOURS[scheme]
    return (
        f"<div style='font-size:17pt; font-weight:600; color:{words['text']}'>"
        "Start a conversation</div>"
        f"<div style='color:{words['hint']}; margin-top:6px'>Messages stay on this computer, "
        "saved as they stream.</div>"
    )


class EmptyState(QLabel):
    """What the chat shows before its first message; rich text names its colours, so they
    are written again for the look whenever the palette changes (a theme switch)."""

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("emptyState")
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setText(empty_state_html(scheme_of(self.palette())))

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self.setText(empty_state_html(scheme_of(self.palette())))


@dataclass(frozen=True)
class PageLayout:
    """The containers the page switches between (and the splitter tests size)."""

    empty_state: QLabel
    stack: QStackedWidget  # the empty state or the messages
    modes: QStackedWidget  # the conversation (chat_area) or the completion panel
    chat_area: QWidget
    splitter: QSplitter


def lay_out(
    page: QWidget,
    header: tuple[QWidget, QWidget],
    view: QWidget,
    composer: tuple[QWidget, QWidget, QWidget],
    notices: tuple[QWidget, QWidget, QWidget],
    completion: QWidget,
    sides: tuple[QWidget, QWidget],
) -> PageLayout:
    """Put the page's widgets in place. `header`: picker, settings toggle; `composer`: input,
    Send, Regenerate; `notices`: the no-model offer, the base-model note (above the input: it
    stays while the chat is open), the engine-stopped notice; `sides`: the
    conversation list, the settings panel (hidden until asked for)."""
    top = _header(*header)
    empty_state = EmptyState()
    stack = QStackedWidget()
    stack.addWidget(empty_state)
    stack.addWidget(view)
    chat_area = _chat_area(stack, notices[:2], _composer(*composer))
    modes = QStackedWidget()
    modes.addWidget(chat_area)
    modes.addWidget(completion)
    center = _center(top, notices[2], modes)

    sides[1].hide()
    splitter = QSplitter()
    splitter.addWidget(sides[0])
    splitter.addWidget(center)
    splitter.addWidget(sides[1])
    splitter.setStretchFactor(1, 1)
    splitter.setSizes([240, 900, 280])
    splitter.setChildrenCollapsible(False)
    layout = QHBoxLayout(page)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(splitter)
    return PageLayout(empty_state, stack, modes, chat_area, splitter)


def _header(picker: QWidget, settings_toggle: QWidget) -> QFrame:
    top = QFrame()
    top.setObjectName("chatHeader")
    top_layout = QHBoxLayout(top)
    top_layout.setContentsMargins(16, 8, 16, 8)
    top_layout.addWidget(picker)
    top_layout.addStretch(1)
    top_layout.addWidget(settings_toggle)
    return top


def _composer(input_box: QWidget, send: QWidget, regenerate: QWidget) -> QFrame:
    """The input with Send and Regenerate beside it."""
    box = QFrame()
    box.setObjectName("composer")
    box_layout = QHBoxLayout(box)
    box_layout.setContentsMargins(10, 8, 10, 8)
    box_layout.addWidget(input_box, 1)
    buttons = QVBoxLayout()
    buttons.addWidget(send)
    buttons.addWidget(regenerate)
    box_layout.addLayout(buttons)
    return box


def _chat_area(stack: QWidget, offers: tuple[QWidget, QWidget], composer: QWidget) -> QWidget:
    """The conversation (or its empty state), and under it the offers and the input."""
    bottom = QVBoxLayout()
    bottom.setContentsMargins(24, 6, 24, 14)
    for offer in offers:
        bottom.addWidget(offer)
    bottom.addWidget(composer)
    chat_area = QWidget()
    chat_layout = QVBoxLayout(chat_area)
    chat_layout.setContentsMargins(0, 0, 0, 0)
    chat_layout.setSpacing(0)
    chat_layout.addWidget(stack, 1)
    chat_layout.addLayout(bottom)
    return chat_area


def _center(top: QWidget, stopped: QWidget, modes: QWidget) -> QWidget:
    """The header, the engine-stopped notice, and the chat or completion panel under them."""
    center = QWidget()
    center.setObjectName("chatCenter")
    center_layout = QVBoxLayout(center)
    center_layout.setContentsMargins(0, 0, 0, 0)
    center_layout.setSpacing(0)
    center_layout.addWidget(top)
    stopped_row = QHBoxLayout()  # above both modes: a dead engine concerns either
    stopped_row.setContentsMargins(24, 8, 24, 0)
    stopped_row.addWidget(stopped)
    center_layout.addLayout(stopped_row)
    center_layout.addWidget(modes, 1)
    return center
