"""Paints one message: role header, bubble with Markdown (QTextDocument), stats footer.

Row sizes are cached per row version (the model's counter: a new one whenever a row's text
or state changes) at the current width, and documents per message, so a token that changes
the last row re-renders that row only; the other 1,999 rows keep their cached height and,
when painted, their cached document. A message keeps one entry of each: its older versions
are dropped when a new one is measured, as they will never be shown again.

Under each bubble, the message's buttons (message_actions.py); inside a reply, code blocks with
a band and a Copy button each (code_blocks.py). Clicks are hit-tested here, in editorEvent.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass

from PySide6.QtCore import (
    QAbstractItemModel,
    QEvent,
    QModelIndex,
    QPersistentModelIndex,
    QPoint,
    QRect,
    QSize,
    Qt,
    Signal,
)
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QColor,
    QFont,
    QFontMetrics,
    QGuiApplication,
    QMouseEvent,
    QPainter,
    QPalette,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
)
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QWidget,
)

from app.chats.records import DONE, FAILED, INTERRUPTED, STOPPED, STREAMING, Message
from app.ui.chat import code_blocks, message_actions
from app.ui.chat.code_blocks import CodeBlock
from app.ui.chat.message_actions import (
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
from app.ui.chat.message_model import (
    IsLastAssistantRole,
    MessageListModel,
    MessageRole,
    VersionRole,
)

log = logging.getLogger(__name__)

SIDE_MARGIN = 28
MAX_COLUMN = 820  # readable line length on wide windows
ROW_GAP = 10
PAD_H, PAD_V = 14, 10
USER_MAX_FRACTION = 0.8
DOC_CACHE_SIZE = 300

USER_BUBBLE = QColor("#dce7fd")
USER_BORDER = QColor("#c7d7f7")
ASSISTANT_BUBBLE = QColor("#ffffff")
ASSISTANT_BORDER = QColor("#e3e6eb")
TEXT = QColor("#1f2328")
MUTED = QColor("#6b7280")
ERROR = QColor("#b42318")

__all__ = ["COPY", "EDIT", "REGENERATE", "MessageDelegate"]  # the page's action names


@dataclass(frozen=True)
class _Layout:
    header: QRect
    bubble: QRect
    doc_origin: QPoint
    footer: QRect  # the row under the bubble: buttons, then a reply's numbers
    buttons: tuple[ActionButton, ...]


@dataclass
class _Rendered:
    """A message's document at one row version and column width, with its code blocks."""

    version: int
    column_width: int
    doc: QTextDocument
    code: tuple[CodeBlock, ...]
    highlighted: bool = False


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
        # message id -> its rendered document, least recently painted first
        self._docs: OrderedDict[int, _Rendered] = OrderedDict()
        self._copied: tuple[int, int] | None = None  # (message id, code block) just copied
        # row version -> (document height, document width) at _heights_width
        self._heights: dict[int, tuple[int, int]] = {}
        self._heights_width = -1
        # row version -> the row's size at _sizes_width (a viewport width): QListView asks
        # for every row's size at each re-layout (5,000 times when older messages come in
        # front), so a known size is returned without reading the message
        self._sizes: dict[int, QSize] = {}
        self._sizes_width = -1
        self._measured_version: dict[int, int] = {}  # message id -> its version in the caches
        self.measurements = 0  # sizes worked out from a message (for tests and stats)
        self._viewport = view.viewport() if isinstance(view, QAbstractScrollArea) else None
        self._model: MessageListModel | None = None
        self.documents_built: dict[int, int] = {}  # message id -> count (for tests and stats)
        self.model_name = ""  # shown in assistant headers

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
        self._docs.clear()
        self._heights.clear()
        self._sizes.clear()
        self._measured_version.clear()
        self._copied = None

    def _on_model_rows_about_to_be_removed(
        self, _parent: QModelIndex, first: int, last: int
    ) -> None:
        if self._model is None:
            return
        for row in range(first, last + 1):
            message_id = self._model.message_at(row).id
            self._docs.pop(message_id, None)
            version = self._measured_version.pop(message_id, None)
            if version is not None:
                self._heights.pop(version, None)
                self._sizes.pop(version, None)

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
        if column_width != self._heights_width:
            self._heights.clear()
            self._heights_width = column_width
        cached = self._heights.get(version)
        if cached is None:
            self._forget_older_version(message.id, version)
            doc = self._document(message, version, column_width)
            cached = (int(doc.size().height() + 0.999), int(doc.textWidth()))
            self._heights[version] = cached
        return cached

    def _forget_older_version(self, message_id: int, version: int) -> None:
        if len(self._measured_version) > 50_000:  # a long session's browsing; start over
            self._measured_version.clear()
            self._heights.clear()
            self._sizes.clear()
        older = self._measured_version.get(message_id)
        if older is not None and older != version:
            self._heights.pop(older, None)
            self._sizes.pop(older, None)
        self._measured_version[message_id] = version

    def _layout(self, rect: QRect, message: Message, version: int, is_last_reply: bool) -> _Layout:
        column = self._column(rect)
        doc_h, doc_w = self._measure(message, version, column.width())
        top = rect.top() + ROW_GAP // 2
        header = QRect(column.left(), top, column.width(), self._header_h)
        bubble_w = doc_w + 2 * PAD_H
        bubble_left = column.right() - bubble_w + 1 if message.role == "user" else column.left()
        bubble = QRect(bubble_left, header.bottom() + 1, bubble_w, doc_h + 2 * PAD_V)
        footer = QRect(column.left(), bubble.bottom() + 2, column.width(), self._footer_h)
        buttons = lay_out_buttons(message, is_last_reply, footer, self._small_font)
        return _Layout(
            header,
            bubble,
            QPoint(bubble.left() + PAD_H, bubble.top() + PAD_V),
            footer,
            buttons,
        )

    def sizeHint(
        self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> QSize:
        width = self._viewport.width() if self._viewport is not None else option.rect.width()
        version = (
            self._model.version_at(index.row())
            if self._model is not None
            else int(index.data(VersionRole))
        )
        if width != self._sizes_width:
            self._sizes.clear()
            self._sizes_width = width
        size = self._sizes.get(version)
        if size is None:
            message: Message = index.data(MessageRole)
            column = self._column(QRect(0, 0, width, 0))
            doc_h, _ = self._measure(message, version, column.width())
            size = QSize(width, ROW_GAP + self._header_h + doc_h + 2 * PAD_V + self._footer_h + 2)
            self._sizes[version] = size
            self.measurements += 1
        return size

    @property
    def documents_held(self) -> int:
        """Rendered documents kept for painting (at most one per message)."""
        return len(self._docs)

    @property
    def rows_measured(self) -> int:
        """Messages whose size is kept (one version each)."""
        return len(self._measured_version)

    # ---- documents --------------------------------------------------------------------

    def _document(self, message: Message, version: int, column_width: int) -> QTextDocument:
        return self._rendered(message, version, column_width).doc

    def _rendered(self, message: Message, version: int, column_width: int) -> _Rendered:
        cached = self._docs.get(message.id)
        if cached is not None and (cached.version, cached.column_width) == (version, column_width):
            self._docs.move_to_end(message.id)
            return cached
        doc = QTextDocument()
        code: tuple[CodeBlock, ...] = ()
        doc.setDocumentMargin(0)
        doc.setDefaultFont(self._font)
        text = message.content
        if message.role == "user":
            doc.setPlainText(text)
        elif not text and message.status == STREAMING:
            doc.setPlainText("…")
        else:
            doc.setMarkdown(
                hard_line_breaks(text), QTextDocument.MarkdownFeature.MarkdownDialectGitHub
            )
            code = code_blocks.frame_code_blocks(doc, text)
        if message.status == FAILED and message.error:
            _add_failure(doc, message.error)
        max_width = self._text_width(message, column_width)
        doc.setTextWidth(max_width)
        if message.role == "user":  # shrink the bubble to the text
            doc.setTextWidth(min(max_width, max(24.0, doc.idealWidth() + 1)))
        rendered = _Rendered(version, column_width, doc, code)
        self._docs[message.id] = rendered  # replaces an older version's
        self._docs.move_to_end(message.id)
        if len(self._docs) > DOC_CACHE_SIZE:
            self._docs.popitem(last=False)
        self.documents_built[message.id] = self.documents_built.get(message.id, 0) + 1
        return rendered

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
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setFont(self._header_font)
        # The name sits on the view's background, not in a bubble: the theme's text colour.
        painter.setPen(option.palette.color(QPalette.ColorRole.WindowText))
        name = "You" if message.role == "user" else "Assistant"
        if message.role == "assistant" and message.model:
            name += "  "
        align = Qt.AlignmentFlag.AlignVCenter | (
            Qt.AlignmentFlag.AlignRight if message.role == "user" else Qt.AlignmentFlag.AlignLeft
        )
        painter.drawText(lay.header, align, name)
        if message.role == "assistant" and message.model:
            painter.setFont(self._small_font)
            painter.setPen(MUTED)
            offset = QFontMetrics(self._header_font).horizontalAdvance(name)
            painter.drawText(
                lay.header.adjusted(offset, 0, 0, 0),
                Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                _short_model(message.model),
            )
        user = message.role == "user"
        painter.setPen(USER_BORDER if user else ASSISTANT_BORDER)
        painter.setBrush(USER_BUBBLE if user else ASSISTANT_BUBBLE)
        painter.drawRoundedRect(lay.bubble.adjusted(0, 0, -1, -1), 10, 10)
        rendered = self._rendered(message, version, self._column(option.rect).width())
        doc = rendered.doc
        if rendered.code and not rendered.highlighted:
            code_blocks.highlight(doc, rendered.code)  # colours only: the height is unchanged
            rendered.highlighted = True
        painter.translate(float(lay.doc_origin.x()), float(lay.doc_origin.y()))
        painter.setClipRect(QRect(0, 0, lay.bubble.width() - 2 * PAD_H, lay.bubble.height()))
        copied = self._copied[1] if self._copied and self._copied[0] == message.id else None
        code_blocks.paint_frames(painter, doc, rendered.code, self._small_font, copied)
        context = QAbstractTextDocumentLayout.PaintContext()
        placeholder = not message.content and message.status == STREAMING
        context.palette.setColor(QPalette.ColorRole.Text, MUTED if placeholder else TEXT)
        doc.documentLayout().draw(painter, context)
        painter.restore()
        paint_buttons(painter, lay.buttons, self._small_font)
        footer = _footer_text(message)
        if footer and message.role == "assistant":
            painter.save()
            painter.setFont(self._small_font)
            painter.setPen(ERROR if message.status == FAILED else MUTED)
            left = lay.buttons[-1].rect.right() + 10 if lay.buttons else lay.footer.left() + 4
            stats = lay.footer.adjusted(left - lay.footer.left(), 0, 0, 0)
            elided = QFontMetrics(self._small_font).elidedText(
                footer, Qt.TextElideMode.ElideRight, stats.width()
            )
            painter.drawText(
                stats, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, elided
            )
            painter.restore()

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
                QGuiApplication.clipboard().setText(code.code)
                self._copied = (message.id, n)
                if self._viewport is not None:
                    self._viewport.update(rect)  # its button says "Copied"
                self.code_copied.emit(code.code)
                return True
        return False

    def button_rect(self, rect: QRect, index: QModelIndex, action: str) -> QRect | None:
        """Where a message's button is drawn, in the row's coordinates (tests click it)."""
        lay = self._layout(
            rect,
            index.data(MessageRole),
            index.data(VersionRole),
            bool(index.data(IsLastAssistantRole)),
        )
        return next((b.rect for b in lay.buttons if b.name == action), None)

    def code_copy_rect(self, rect: QRect, index: QModelIndex, block: int) -> QRect | None:
        """Where the Copy button of the message's code block number `block` is drawn."""
        message: Message = index.data(MessageRole)
        version: int = index.data(VersionRole)
        lay = self._layout(rect, message, version, bool(index.data(IsLastAssistantRole)))
        rendered = self._rendered(message, version, self._column(rect).width())
        if block >= len(rendered.code):
            return None
        button = code_blocks.copy_button(rendered.doc, rendered.code[block], self._small_font)
        return button.toRect().translated(lay.doc_origin)


def hard_line_breaks(text: str) -> str:
    """Keep the model's single line breaks (Markdown would join the lines), except inside
    fenced code blocks, which keep their lines anyway."""
    lines = text.split("\n")
    in_fence = False
    for i, line in enumerate(lines[:-1]):
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if not in_fence and line.strip() and lines[i + 1].strip() and not line.endswith("  "):
            lines[i] = line + "  "
    return "\n".join(lines)


def _add_failure(doc: QTextDocument, reason: str) -> None:
    """Why the reply failed, after any text it had: plain text (it may quote a file's own
    words) in the error colour."""
    cursor = QTextCursor(doc)
    cursor.movePosition(QTextCursor.MoveOperation.End)
    if not doc.isEmpty():
        cursor.insertBlock()
    failed = QTextCharFormat()
    failed.setForeground(ERROR)
    cursor.insertText(f"⚠ The reply failed: {reason}", failed)


def _footer_text(message: Message) -> str:
    parts = []
    if message.generated_tokens:
        parts.append(f"{message.generated_tokens} tokens")
    if message.tokens_per_second:
        parts.append(f"{message.tokens_per_second:.1f} tok/s")
    if message.time_to_first_token_s:
        parts.append(f"{message.time_to_first_token_s:.2f} s to first token")
    status = {
        STOPPED: "stopped",
        FAILED: "failed",
        INTERRUPTED: "interrupted",
        STREAMING: "generating…",
    }.get(message.status)
    if status:
        parts.append(status)
    return "  ·  ".join(parts) if message.status != DONE or parts else ""


def _short_model(path: str) -> str:
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return name.removesuffix(".gguf")
