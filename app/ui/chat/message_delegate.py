"""Paints one message: role header, bubble with Markdown (QTextDocument), stats footer.

Row sizes are kept per row version (row_sizes.py) and documents per message
(message_document.py), so a token that changes the last row re-renders that row only; the
other 1,999 rows keep their measured height and, when painted, their document.

Under each bubble, the message's buttons (message_actions.py); inside a reply, code blocks with
a band and a Copy button each (code_blocks.py). Clicks are hit-tested here, in editorEvent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from PySide6.QtCore import (
    QAbstractItemModel,
    QEvent,
    QModelIndex,
    QPersistentModelIndex,
    QPoint,
    QRect,
    QSize,
    Signal,
)
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QFont,
    QFontMetrics,
    QGuiApplication,
    QMouseEvent,
    QPainter,
    QPalette,
    QPen,
    QTextDocument,
)
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QWidget,
)

from app.chats.records import FAILED, STREAMING, Message
from app.ui.chat import code_blocks, message_actions
from app.ui.chat.chat_colours import chat_colours
from app.ui.chat.message_actions import (
    CONTINUE,
    COPY,
    EDIT,
    NEXT,
    PREVIOUS,
    REGENERATE,
    ActionButton,
    button_at,
    lay_out_buttons,
    paint_buttons,
)
from app.ui.chat.message_document import MessageDocuments, RenderedMessage
from app.ui.chat.message_footer import paint_footer, paint_header, paint_ring
from app.ui.chat.message_model import (
    IsLastAssistantRole,
    MessageListModel,
    MessageRole,
    VersionRole,
)
from app.ui.chat.row_sizes import RowSizes

log = logging.getLogger(__name__)

SIDE_MARGIN = 28
MAX_COLUMN = 820  # readable line length on wide windows
ROW_GAP = 10
PAD_H, PAD_V = 14, 10
USER_MAX_FRACTION = 0.8

__all__ = ["CONTINUE", "COPY", "EDIT", "REGENERATE", "MessageDelegate"]  # the page's action names


@dataclass(frozen=True)
class _Layout:
    header: QRect
    bubble: QRect
    doc_origin: QPoint
    footer: QRect  # the row under the bubble: buttons, then a reply's numbers
    buttons: tuple[ActionButton, ...]


class MessageDelegate(QStyledItemDelegate):
    """Signals:
    action_requested(str, int): a message's button was clicked: (COPY|EDIT|REGENERATE,
        message id).
    version_requested(int, int): a reply's ‹ or › was clicked: (message id, version number).
    code_copied(str): a code block's Copy button put this code on the clipboard.
    """

    action_requested = Signal(str, int)
    version_requested = Signal(int, int)
    code_copied = Signal(str)

    def __init__(self, view: QWidget) -> None:
        super().__init__(view)
        self._view = view
        self._font = QFont(view.font())
        self._font.setPointSizeF(max(10.5, self._font.pointSizeF()))
        self._header_font = QFont(self._font)
        self._header_font.setBold(True)
        self._header_font.setPointSizeF(self._font.pointSizeF() - 0.5)
        self._small_font = QFont(self._font)
        self._small_font.setPointSizeF(self._font.pointSizeF() - 1.5)
        self._header_h = QFontMetrics(self._header_font).height() + 4
        self._footer_h = message_actions.row_height(self._small_font)
        self._documents = MessageDocuments(self._font)
        self._copied: tuple[int, int] | None = None  # (message id, code block) just copied
        self._sizes = RowSizes()
        self.measurements = 0  # sizes worked out from a message (for tests and stats)
        self._viewport = view.viewport() if isinstance(view, QAbstractScrollArea) else None
        self._model: MessageListModel | None = None
        self.model_name = ""  # shown in assistant headers
        # The message being edited: its bubble, highlighted, is editor_height high and holds
        # the editor (message_editor.py), which the view places over it.
        self.editing_id: int | None = None
        self.editor_height = 0
        # (message id, target) the keyboard is on, drawn with a ring (message_focus.py)
        self.focus: tuple[int, str] | None = None

    def read_versions_from(self, model: MessageListModel) -> None:
        """Take row versions straight from `model`, the view's: a Python call where Qt's
        data() is a round trip through C++, for each of a re-layout's thousands of sizes.
        What is kept for a message goes when it leaves the model (another conversation
        opened, rows removed): its versions are never shown again."""
        self._model = model
        model.modelReset.connect(self._on_model_reset)
        model.rowsAboutToBeRemoved.connect(self._on_model_rows_about_to_be_removed)

    def _on_model_reset(self) -> None:
        # Every row has a new version now, so nothing kept can be used again.
        self._documents.clear()
        self._sizes.clear()
        self._copied = None

    def _on_model_rows_about_to_be_removed(
        self, _parent: QModelIndex, first: int, last: int
    ) -> None:
        if self._model is None:
            return
        for row in range(first, last + 1):
            message_id = self._model.message_at(row).id
            self._documents.forget(message_id)
            self._sizes.forget(message_id)

    # ---- geometry ---------------------------------------------------------------------

    def _column(self, rect: QRect) -> QRect:
        width = min(MAX_COLUMN, max(200, rect.width() - 2 * SIDE_MARGIN))
        left = rect.left() + (rect.width() - width) // 2
        return QRect(left, rect.top(), width, rect.height())

    def _text_width(self, message: Message, column_width: int) -> int:
        if message.role == "user":
            return int(column_width * USER_MAX_FRACTION) - 2 * PAD_H
        return column_width - 2 * PAD_H

    def _measure(self, message: Message, version: int, column_width: int) -> tuple[int, int]:
        """(document height, document width used) for this message at this column width."""
        cached = self._sizes.document_size(version, column_width)
        if cached is None:
            doc = self._document(message, version, column_width)
            cached = (int(doc.size().height() + 0.999), int(doc.textWidth()))
            self._sizes.keep_document_size(message.id, version, cached)
        return cached

    def _layout(self, rect: QRect, message: Message, version: int, is_last_reply: bool) -> _Layout:
        column = self._column(rect)
        editing = message.id == self.editing_id  # the bubble holds the editor: no buttons
        if editing:
            doc_h, doc_w = self.editor_height - 2 * PAD_V, column.width() - 2 * PAD_H
        else:
            doc_h, doc_w = self._measure(message, version, column.width())
        top = rect.top() + ROW_GAP // 2
        header = QRect(column.left(), top, column.width(), self._header_h)
        bubble_w = doc_w + 2 * PAD_H
        bubble_left = column.right() - bubble_w + 1 if message.role == "user" else column.left()
        bubble = QRect(bubble_left, header.bottom() + 1, bubble_w, doc_h + 2 * PAD_V)
        footer = QRect(column.left(), bubble.bottom() + 2, column.width(), self._footer_h)
        buttons = (
            () if editing else lay_out_buttons(message, is_last_reply, footer, self._small_font)
        )
        origin = QPoint(bubble.left() + PAD_H, bubble.top() + PAD_V)
        return _Layout(header, bubble, origin, footer, buttons)

    def sizeHint(
        self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> QSize:
        width = self._viewport.width() if self._viewport is not None else option.rect.width()
        version = (
            self._model.version_at(index.row())
            if self._model is not None
            else int(index.data(VersionRole))
        )
        size = self._sizes.row_size(version, width)
        if self.editing_id is not None and index.data(MessageRole).id == self.editing_id:
            return QSize(width, 2 * ROW_GAP + self._header_h + self.editor_height)  # no buttons
        if size is None:
            message: Message = index.data(MessageRole)
            column = self._column(QRect(0, 0, width, 0))
            doc_h, _ = self._measure(message, version, column.width())
            size = QSize(width, ROW_GAP + self._header_h + doc_h + 2 * PAD_V + self._footer_h + 2)
            self._sizes.keep_row_size(version, size)
            self.measurements += 1
        return size

    def column_width(self, viewport_width: int) -> int:
        """The width of the messages' column (an edited message's bubble) in the view."""
        return self._column(QRect(0, 0, viewport_width, 0)).width()

    @property
    def documents_held(self) -> int:
        """Rendered documents kept for painting (at most one per message)."""
        return len(self._documents)

    @property
    def documents_built(self) -> dict[int, int]:
        """Message id -> documents built for it (for tests and stats)."""
        return self._documents.built

    @property
    def rows_measured(self) -> int:
        """Messages whose size is kept (one version each)."""
        return len(self._sizes)

    # ---- documents --------------------------------------------------------------------

    def _document(self, message: Message, version: int, column_width: int) -> QTextDocument:
        return self._rendered(message, version, column_width).doc

    def _rendered(self, message: Message, version: int, column_width: int) -> RenderedMessage:
        text_width = self._text_width(message, column_width)
        return self._documents.rendered(message, version, column_width, text_width)

    # ---- painting ---------------------------------------------------------------------

    def paint(
        self,
        painter: QPainter,
        option: QStyleOptionViewItem,
        index: QModelIndex | QPersistentModelIndex,
    ) -> None:
        message: Message = index.data(MessageRole)
        version: int = index.data(VersionRole)
        is_last = bool(index.data(IsLastAssistantRole))
        lay = self._layout(option.rect, message, version, is_last)
        # The look's colours; documents coloured for the other look are written again.
        self._documents.follow(chat_colours(option.palette))
        colours = self._documents.colours
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        editing = message.id == self.editing_id
        paint_header(
            painter, lay.header, message, editing, (self._header_font, self._small_font), colours
        )
        border = (
            QPen(colours.accent, 2.0)
            if editing
            else QPen(colours.user_border if message.role == "user" else colours.reply_border)
        )
        painter.setPen(border)
        painter.setBrush(colours.user_bubble if message.role == "user" else colours.reply_bubble)
        painter.drawRoundedRect(lay.bubble.adjusted(1, 1, -1, -1), 10, 10)
        if editing:  # its editor (a widget over the bubble) shows the text
            painter.restore()
            return
        rendered = self._rendered(message, version, self._column(option.rect).width())
        doc = rendered.doc
        if rendered.code and not rendered.highlighted:
            # colours only: the height is unchanged
            code_blocks.highlight(doc, rendered.code, colours.code_style)
            rendered.highlighted = True
        painter.translate(float(lay.doc_origin.x()), float(lay.doc_origin.y()))
        painter.setClipRect(QRect(0, 0, lay.bubble.width() - 2 * PAD_H, lay.bubble.height()))
        copied = self._copied[1] if self._copied and self._copied[0] == message.id else None
        code_blocks.paint_frames(painter, doc, rendered.code, self._small_font, colours, copied)
        context = QAbstractTextDocumentLayout.PaintContext()
        placeholder = not message.content and message.status == STREAMING
        context.palette.setColor(
            QPalette.ColorRole.Text, colours.muted if placeholder else colours.text
        )
        doc.documentLayout().draw(painter, context)
        painter.restore()
        paint_buttons(painter, lay.buttons, self._small_font, colours)
        if self.focus is not None and self.focus[0] == message.id:
            target = self.focus[1]
            ring = (
                lay.bubble
                if not target
                else self.code_copy_rect(option.rect, index, int(target[5:]))
                if target.startswith("code:")
                else next((b.rect for b in lay.buttons if b.name == target), None)
            )
            if ring is not None:
                paint_ring(painter, ring, colours.accent)
        if message.role == "assistant":
            left = lay.buttons[-1].rect.right() + 10 if lay.buttons else lay.footer.left() + 4
            stats = lay.footer.adjusted(left - lay.footer.left(), 0, 0, 0)
            colour = colours.error if message.status == FAILED else colours.muted
            paint_footer(painter, stats, message, self._small_font, colour)

    def editorEvent(
        self,
        event: QEvent,
        model: QAbstractItemModel,
        option: QStyleOptionViewItem,
        index: QModelIndex | QPersistentModelIndex,
    ) -> bool:
        if event.type() == QEvent.Type.MouseButtonRelease and isinstance(event, QMouseEvent):
            message: Message = index.data(MessageRole)
            lay = self._layout(
                option.rect, message, index.data(VersionRole), bool(index.data(IsLastAssistantRole))
            )
            pos = event.position().toPoint()
            button = button_at(lay.buttons, pos.x(), pos.y())
            if button is not None:
                if button.name in (PREVIOUS, NEXT):
                    step = -1 if button.name == PREVIOUS else 1
                    self.version_requested.emit(message.id, message.version + step)
                else:
                    self.action_requested.emit(button.name, message.id)
                return True
            if self._copy_code_at(message, index.data(VersionRole), option.rect, lay, pos):
                return True
        return super().editorEvent(event, model, option, index)

    def _copy_code_at(
        self, message: Message, version: int, rect: QRect, lay: _Layout, pos: QPoint
    ) -> bool:
        rendered = self._rendered(message, version, self._column(rect).width())
        x, y = pos.x() - lay.doc_origin.x(), pos.y() - lay.doc_origin.y()
        for n, code in enumerate(rendered.code):
            if code_blocks.copy_button(rendered.doc, code, self._small_font).contains(x, y):
                self._copy_code(message, code.code, n, rect)
                return True
        return False

    def _copy_code(self, message: Message, code: str, n: int, rect: QRect) -> None:
        QGuiApplication.clipboard().setText(code)
        self._copied = (message.id, n)
        if self._viewport is not None:
            self._viewport.update(rect)  # its button says "Copied"
        self.code_copied.emit(code)

    # ---- what the keyboard reaches (message_focus.py) --------------------------------------

    def bubble_and_buttons(
        self, rect: QRect, index: QModelIndex | QPersistentModelIndex
    ) -> tuple[QRect, tuple[ActionButton, ...]]:
        """Where the message's bubble is drawn (the row's coordinates), and its buttons."""
        message: Message = index.data(MessageRole)
        lay = self._layout(rect, message, index.data(VersionRole), index.data(IsLastAssistantRole))
        return lay.bubble, lay.buttons

    def document(self, rect: QRect, index: QModelIndex | QPersistentModelIndex) -> QTextDocument:
        """The text painted in the message's bubble, as laid out (tests read its colours)."""
        message: Message = index.data(MessageRole)
        return self._document(message, index.data(VersionRole), self._column(rect).width())

    def code_count(self, rect: QRect, index: QModelIndex | QPersistentModelIndex) -> int:
        """How many code blocks (each with its Copy button) the message shows."""
        message: Message = index.data(MessageRole)
        version: int = index.data(VersionRole)
        return len(self._rendered(message, version, self._column(rect).width()).code)

    def copy_code(self, rect: QRect, index: QModelIndex | QPersistentModelIndex, n: int) -> None:
        """What the Copy button of code block `n` does."""
        message: Message = index.data(MessageRole)
        rendered = self._rendered(message, index.data(VersionRole), self._column(rect).width())
        if n < len(rendered.code):
            self._copy_code(message, rendered.code[n].code, n, rect)

    def button_rect(self, rect: QRect, index: QModelIndex, action: str) -> QRect | None:
        """Where a message's button is drawn, in the row's coordinates (tests click it)."""
        buttons = self.bubble_and_buttons(rect, index)[1]
        return next((b.rect for b in buttons if b.name == action), None)

    def code_copy_rect(
        self, rect: QRect, index: QModelIndex | QPersistentModelIndex, block: int
    ) -> QRect | None:
        """Where the Copy button of the message's code block number `block` is drawn."""
        message: Message = index.data(MessageRole)
        version: int = index.data(VersionRole)
        lay = self._layout(rect, message, version, bool(index.data(IsLastAssistantRole)))
        rendered = self._rendered(message, version, self._column(rect).width())
        if block >= len(rendered.code):
            return None
        button = code_blocks.copy_button(rendered.doc, rendered.code[block], self._small_font)
        return button.toRect().translated(lay.doc_origin)
