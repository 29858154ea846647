"""Fenced code blocks in a rendered reply: found, framed, highlighted, and copied exactly.

Qt's Markdown import turns a fenced block into one QTextBlock per line (tabs expanded), so the
text to copy is read from the reply's Markdown source (`fenced_code`), matched to the document's
runs of code lines in order. Highlighting (pygments) sets colours only, never weight or style,
so it cannot change a line's width: it runs when a message is first painted, not when the
thousands of rows of a long conversation are measured.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache

from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.styles import get_style_by_name
from pygments.token import _TokenType
from pygments.util import ClassNotFound
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetrics,
    QPainter,
    QTextBlock,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
)

from app.ui.chat.chat_colours import ChatColours

log = logging.getLogger(__name__)

STRIP_H = 24  # the band above the code with its language and Copy button
CODE_PAD = 8
COPY_LABEL, COPIED_LABEL = "Copy", "Copied"


@dataclass(frozen=True)
class FencedCode:
    """A fenced block as the Markdown source has it."""

    language: str
    code: str


@dataclass(frozen=True)
class CodeBlock:
    """A fenced block in a rendered document: its lines, language and exact code."""

    first: int  # block numbers of its first and last line in the document
    last: int
    language: str
    code: str


def fenced_code(markdown: str) -> list[FencedCode]:
    """The fenced code blocks of `markdown`, in order, with their code exactly as written
    (the fence's indentation removed, as CommonMark does); an unclosed fence runs to the end."""
    found: list[FencedCode] = []
    lines = markdown.split("\n")
    i = 0
    while i < len(lines):
        stripped = lines[i].lstrip(" ")
        indent = len(lines[i]) - len(stripped)
        fence_char = stripped[:1]
        if indent > 3 or fence_char not in ("`", "~"):
            i += 1
            continue
        fence_len = len(stripped) - len(stripped.lstrip(fence_char))
        info = stripped[fence_len:].strip()
        if fence_len < 3 or (fence_char == "`" and "`" in info):
            i += 1
            continue
        body: list[str] = []
        i += 1
        while i < len(lines):
            closing = lines[i].strip()
            if closing.startswith(fence_char * fence_len) and not closing.strip(fence_char):
                break
            line = lines[i]
            body.append(line[min(indent, len(line) - len(line.lstrip(" "))) :])
            i += 1
        i += 1  # past the closing fence
        found.append(FencedCode(info.split()[0] if info else "", "\n".join(body)))
    return found


def frame_code_blocks(doc: QTextDocument, markdown: str) -> tuple[CodeBlock, ...]:
    """Find the document's code blocks and make room around each for its frame and band
    (margins: part of the measured height). The code to copy comes from `markdown`'s fences
    when they match the document's blocks one for one, else from the document's lines."""
    runs: list[list[QTextBlock]] = []
    block = doc.begin()
    previous_code = False
    while block.isValid():
        is_code = block.blockFormat().hasProperty(QTextFormat.Property.BlockCodeFence)
        if is_code and not previous_code:
            runs.append([])
        if is_code:
            runs[-1].append(block)
        previous_code = is_code
        block = block.next()
    if not runs:
        return ()
    fences = fenced_code(markdown)
    matched = len(fences) == len(runs)
    blocks = []
    for n, run in enumerate(runs):
        for line in run:
            fmt = QTextBlockFormat()
            fmt.setLeftMargin(CODE_PAD)
            fmt.setRightMargin(CODE_PAD)
            fmt.setNonBreakableLines(False)  # long lines wrap inside the bubble
            fmt.setBackground(Qt.BrushStyle.NoBrush)
            if line == run[0]:
                fmt.setTopMargin(STRIP_H + 12)
            if line == run[-1]:
                fmt.setBottomMargin(CODE_PAD + 6)
            QTextCursor(line).mergeBlockFormat(fmt)
        language = str(run[0].blockFormat().property(QTextFormat.Property.BlockCodeLanguage) or "")
        code = fences[n].code if matched else "\n".join(line.text() for line in run)
        blocks.append(CodeBlock(run[0].blockNumber(), run[-1].blockNumber(), language, code))
    return tuple(blocks)


def code_frame(doc: QTextDocument, code: CodeBlock) -> QRectF:
    """The block's frame in document coordinates: band and code lines (a block's bounding
    rect leaves out its margins, which frame_code_blocks made room for the frame in)."""
    layout = doc.documentLayout()
    top = layout.blockBoundingRect(doc.findBlockByNumber(code.first)).top() - STRIP_H - 6
    bottom = layout.blockBoundingRect(doc.findBlockByNumber(code.last)).bottom() + CODE_PAD - 2
    return QRectF(0.0, top, doc.textWidth(), bottom - top)


def copy_button(doc: QTextDocument, code: CodeBlock, font: QFont) -> QRectF:
    """Where the block's Copy button is, in document coordinates."""
    frame = code_frame(doc, code)
    width = QFontMetrics(font).horizontalAdvance(COPIED_LABEL) + 16
    return QRectF(frame.right() - width - 4, frame.top() + 3, width, STRIP_H - 6)


def paint_frames(
    painter: QPainter,
    doc: QTextDocument,
    blocks: tuple[CodeBlock, ...],
    font: QFont,
    colours: ChatColours,
    copied: int | None = None,
) -> None:
    """Draw each block's frame and band (under the document's text) in the look's
    `colours`; `copied`: the index of a block just copied, whose button says so."""
    painter.save()
    painter.setFont(font)
    for n, code in enumerate(blocks):
        frame = code_frame(doc, code)
        painter.setPen(colours.code_border)
        painter.setBrush(colours.code)
        painter.drawRoundedRect(frame.adjusted(0.5, 0.5, -0.5, -0.5), 6, 6)
        painter.drawLine(
            QPointF(frame.left() + 1, frame.top() + STRIP_H),
            QPointF(frame.right() - 1, frame.top() + STRIP_H),
        )
        painter.setPen(colours.muted)
        band = QRectF(frame.left() + CODE_PAD, frame.top(), frame.width() / 2, STRIP_H)
        painter.drawText(band, Qt.AlignmentFlag.AlignVCenter, code.language or "code")
        button = copy_button(doc, code, font)
        painter.setBrush(colours.button)
        painter.setPen(colours.code_border)
        painter.drawRoundedRect(button, 4, 4)
        painter.setPen(colours.muted)
        label = COPIED_LABEL if n == copied else COPY_LABEL
        painter.drawText(button, Qt.AlignmentFlag.AlignCenter, label)
    painter.restore()


def highlight(doc: QTextDocument, blocks: tuple[CodeBlock, ...], style: str) -> None:
    """Colour each block's code by its language in the pygments `style` (a light style on the
    light look's code background, a dark one on the dark look's); unknown or no language: left
    in the text's colour."""
    for code in blocks:
        lexer = _lexer(code.language.lower())
        if lexer is None:
            continue
        first = doc.findBlockByNumber(code.first)
        start = first.position()
        # The document's lines (tabs expanded), so positions match what is laid out; one
        # character between lines, like the document's block separator.
        lines, block = [], first
        while block.isValid() and block.blockNumber() <= code.last:
            lines.append(block.text())
            block = block.next()
        text = "\n".join(lines)
        cursor = QTextCursor(doc)
        offset = 0
        for token, value in lexer.get_tokens(text):
            fmt = _format(style, token)
            end = min(offset + len(value), len(text))
            if fmt is not None and end > offset:
                cursor.setPosition(start + offset)
                cursor.setPosition(start + end, QTextCursor.MoveMode.KeepAnchor)
                cursor.mergeCharFormat(fmt)
            offset = end


@lru_cache(maxsize=64)
def _lexer(language: str) -> Lexer | None:
    if not language:
        return None
    try:
        # stripnl off: a leading blank line must stay, or every position after it shifts
        return get_lexer_by_name(language, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


@lru_cache(maxsize=1024)
def _format(style: str, token: _TokenType) -> QTextCharFormat | None:
    color = get_style_by_name(style).style_for_token(token)["color"]
    if not color:
        return None
    fmt = QTextCharFormat()
    fmt.setForeground(QColor(f"#{color}"))
    return fmt
