"""A message's text laid out for painting: a QTextDocument with the user's words as plain text,
a reply's Markdown with its code blocks framed, and why a reply failed; and the cache that keeps
one such document per message, so a token re-renders the last row only."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from PySide6.QtGui import QColor, QFont, QTextCharFormat, QTextCursor, QTextDocument

from app.chats.records import FAILED, STREAMING, Message
from app.ui.chat import code_blocks
from app.ui.chat.chat_colours import ChatColours, colours_for
from app.ui.chat.code_blocks import CodeBlock
from app.ui.theme_colours import LIGHT

DOC_CACHE_SIZE = 300


@dataclass
class RenderedMessage:
    """A message's document at one row version and column width, with its code blocks."""

    version: int
    column_width: int
    doc: QTextDocument
    code: tuple[CodeBlock, ...]
    highlighted: bool = False


class MessageDocuments:
    """The rendered document of each message, least recently painted first: one per message (a
    new version replaces the older one, never shown again) and DOC_CACHE_SIZE in all."""

    def __init__(self, font: QFont) -> None:
        self._font = font
        self._docs: OrderedDict[int, RenderedMessage] = OrderedDict()  # message id -> document
        self._colours = colours_for(LIGHT)  # the look documents are written and coloured for
        self.built: dict[int, int] = {}  # message id -> documents built (for tests and stats)

    def __len__(self) -> int:
        return len(self._docs)

    def rendered(
        self, message: Message, version: int, column_width: int, text_width: int
    ) -> RenderedMessage:
        """`message` at row `version` in a column `column_width` wide, its text at most
        `text_width` wide: the kept document, or a new one."""
        cached = self._docs.get(message.id)
        if cached is not None and (cached.version, cached.column_width) == (version, column_width):
            self._docs.move_to_end(message.id)
            return cached
        doc, code = _document(message, self._font, text_width, self._colours.error)
        rendered = RenderedMessage(version, column_width, doc, code)
        self._docs[message.id] = rendered  # replaces an older version's
        self._docs.move_to_end(message.id)
        if len(self._docs) > DOC_CACHE_SIZE:
            self._docs.popitem(last=False)
        self.built[message.id] = self.built.get(message.id, 0) + 1
        return rendered

    def forget(self, message_id: int) -> None:
        self._docs.pop(message_id, None)

    def clear(self) -> None:
        self._docs.clear()

    @property
    def colours(self) -> ChatColours:
        return self._colours

    def follow(self, colours: ChatColours) -> None:
        """Write and colour documents in the look of `colours` from now on: those of another
        look (their failure text, their code's colours) are dropped, to be written again;
        the sizes measured stay, as only colours change."""
        if colours.scheme != self._colours.scheme:
            self._colours = colours
            self._docs.clear()


def _document(
    message: Message, font: QFont, max_width: int, error: QColor
) -> tuple[QTextDocument, tuple[CodeBlock, ...]]:
    doc = QTextDocument()
    code: tuple[CodeBlock, ...] = ()
    doc.setDocumentMargin(0)
    doc.setDefaultFont(font)
    text = message.content
    if message.role == "user":
        doc.setPlainText(text)
    elif not text and message.status == STREAMING:
        doc.setPlainText("…")
    else:
        doc.setMarkdown(hard_line_breaks(text), QTextDocument.MarkdownFeature.MarkdownDialectGitHub)
        code = code_blocks.frame_code_blocks(doc, text)
    if message.status == FAILED and message.error:
        _add_failure(doc, message.error, error)
    doc.setTextWidth(max_width)
    if message.role == "user":  # shrink the bubble to the text
        doc.setTextWidth(min(max_width, max(24.0, doc.idealWidth() + 1)))
    return doc, code


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


def _add_failure(doc: QTextDocument, reason: str, colour: QColor) -> None:
    """Why the reply failed, after any text it had: plain text (it may quote a file's own
    words) in the error colour."""
    cursor = QTextCursor(doc)
    cursor.movePosition(QTextCursor.MoveOperation.End)
    if not doc.isEmpty():
        cursor.insertBlock()
    failed = QTextCharFormat()
    failed.setForeground(colour)
    cursor.insertText(f"⚠ The reply failed: {reason}", failed)
