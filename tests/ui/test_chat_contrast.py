"""The chat's messages, which the message delegate paints itself (no style sheet reaches them),
are readable in the light and the dark look: each word painted (the names above the bubbles,
a question, a reply with a code block, its coloured code, the code's band and Copy button, the
buttons under the messages, a reply's numbers) stands at 4.5:1 or more (WCAG AA) against the
pixels painted under it, after switching looks with the conversation open. Before, the dark
look showed white bubbles and buttons with the light look's colours around them."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QRect, QRectF
from PySide6.QtGui import QColor, QImage, QTextDocument
from PySide6.QtWidgets import QApplication

from app.chats.records import DONE, STREAMING
from app.ui.chat.message_actions import VERSION
from app.ui.theme import DARK, LIGHT, ThemeController
from tests.ui.contrast import AA, contrast, contrast_problems, painted_background, painted_text

QUESTION = "How do I add two numbers in Python?"
REPLY = (
    "Use a function:\n\n"
    "```python\n"
    "def add(a, b):\n"
    '    """Sum of two numbers."""  # a comment\n'
    "    return a + b if a else 0x1F\n"
    "```\n\n"
    "Then call it."
)


@pytest.fixture(autouse=True)
def app_look_restored(qapp):
    """The theme is app-wide: put back the stylesheet and palette other tests run with."""
    sheet, palette = qapp.styleSheet(), qapp.palette()
    yield
    qapp.setStyleSheet(sheet)
    qapp.setPalette(palette)


def _open_conversation(app):
    """A question and a reply with a code block in two versions (so ‹ 2 / 2 › shows)."""
    page, store = app.window.chat, app.store
    conversation = page.session.new_conversation()
    store.add_message(conversation.id, "user", QUESTION)
    reply = store.add_message(conversation.id, "assistant", "", STREAMING, model="/m/tiny.gguf")
    store.finish_message(reply.id, "An earlier reply.", DONE, generated_tokens=4)
    store.start_new_version(reply.id, "/m/tiny.gguf")
    store.finish_message(reply.id, REPLY, DONE, generated_tokens=42)
    page.open_conversation(conversation.id)
    return page


def _settle() -> None:
    for _ in range(5):
        QApplication.processEvents()


def _words_problems(image: QImage, what: str, area: QRect) -> list[str]:
    """`area`'s words (its pixel that stands out most) against what is painted under them."""
    background = painted_background(image, area)
    words = painted_text(image, area, background)
    ratio = contrast(words, background)
    if ratio < AA:
        return [f"{what}: {ratio:.1f}:1 ({words.name()} on {background.name()})"]
    return []


def _code_colours(doc: QTextDocument) -> set[str]:
    """The colours the reply's code is written in (each highlighted token's)."""
    found = set()
    block = doc.begin()
    while block.isValid():
        if block.blockFormat().leftMargin() > 0:  # a code line (frame_code_blocks' margin)
            it = block.begin()
            while not it.atEnd():
                brush = it.fragment().charFormat().foreground()
                if brush.style().value and it.fragment().text().strip():
                    found.add(brush.color().name())
                it += 1
        block = block.next()
    return found


def _message_problems(page, image: QImage, row: int) -> list[str]:
    view, delegate = page.view, page.view.delegate
    index = page.session.model.index(row)
    rect = view.visualRect(index)
    bubble, buttons = delegate.bubble_and_buttons(rect, index)
    who = "question" if row == 0 else "reply"
    header = QRect(rect.left(), rect.top(), rect.width(), bubble.top() - rect.top())
    problems = _words_problems(image, f"{who}'s header", header)
    doc = delegate.document(rect, index)
    origin = bubble.topLeft() + QPoint(14, 10)  # the delegate's padding
    first_line = doc.documentLayout().blockBoundingRect(doc.begin()).toRect().translated(origin)
    problems += _words_problems(image, f"{who}'s first line", first_line)
    enabled = [b for b in buttons if b.enabled or b.name == VERSION]
    for button in enabled:
        problems += _words_problems(
            image, f"{who}'s {button.label}", button.rect.adjusted(2, 2, -2, -2)
        )
    if row == 1:
        copy = delegate.code_copy_rect(rect, index, 0)
        assert copy is not None
        problems += _words_problems(image, "code's Copy", copy.adjusted(2, 2, -2, -2))
        band = QRect(bubble.left() + 14, copy.top(), 60, copy.height())
        problems += _words_problems(image, "code's language", band)
        stats = QRect(
            buttons[-1].rect.right() + 8, buttons[-1].rect.top(), 160, buttons[-1].rect.height()
        )
        problems += _words_problems(image, "reply's numbers", stats)
        code_line = doc.documentLayout().blockBoundingRect(doc.findBlockByNumber(2))
        code_area = QRectF(code_line).toRect().translated(origin)
        background = painted_background(image, code_area)
        colours = _code_colours(doc)
        assert len(colours) >= 3  # highlighted: keyword, string, comment, number...
        for colour in sorted(colours):
            ratio = contrast(QColor(colour), background)
            if ratio < AA:
                problems.append(f"code in {colour}: {ratio:.1f}:1 on {background.name()}")
    return problems


def test_messages_bubbles_and_their_buttons_read_at_aa_in_both_looks(qtbot, chat_app) -> None:
    page = _open_conversation(chat_app)
    theme = chat_app.window.findChild(ThemeController)
    found: dict[str, list[str]] = {}
    bubbles: dict[str, QColor] = {}
    for scheme in (LIGHT, DARK):
        theme.choose(scheme)
        _settle()
        page.view.executeDelayedItemsLayout()
        image = page.view.viewport().grab().toImage()
        problems = _message_problems(page, image, 0) + _message_problems(page, image, 1)
        if problems:
            found[scheme] = problems
        index = page.session.model.index(1)
        bubble = page.view.delegate.bubble_and_buttons(page.view.visualRect(index), index)[0]
        bubbles[scheme] = painted_background(image, bubble.adjusted(4, 4, -4, -4))
    assert found == {}, "\n".join(f"{look}: {p}" for look, ps in found.items() for p in ps)
    # A reply's bubble is dark in the dark look (it was a white block).
    assert bubbles[DARK].lightness() < 64 < bubbles[LIGHT].lightness()


def test_the_empty_chat_reads_at_aa_in_both_looks(qtbot, chat_app) -> None:
    """Its rich text names its colours: they follow the look (#1f2328 was 1.1:1 in dark)."""
    page = chat_app.window.chat
    page.session.new_conversation()
    theme = chat_app.window.findChild(ThemeController)
    for scheme in (LIGHT, DARK):
        theme.choose(scheme)
        _settle()
        assert page.empty_state.isVisible()
        problems = [p for p in contrast_problems(page) if "emptyState" in p]
        assert problems == [], scheme


def test_continued_text_keeps_its_colour_readable_across_a_theme_switch(qtbot, qapp) -> None:
    """A base model's continuation is written in the look's blue (#1d4ed8 was 2.3:1 on the
    dark text box); text written in one look is coloured again when the look changes."""
    from app.load.profile import LoadProfile
    from app.services.engine_client import EngineClient
    from app.ui.chat.completion_panel import GENERATED, CompletionPanel
    from app.ui.theme import show_scheme
    from tests.fake_engine import FakeEngine
    from tests.waits import HANG_GUARD_MS

    engine = EngineClient(process_factory=lambda: FakeEngine("and the sea was calm."))
    panel = CompletionPanel(engine)
    qtbot.addWidget(panel)
    panel.resize(900, 500)
    panel.show()
    with qtbot.waitSignal(engine.model_loaded, timeout=HANG_GUARD_MS):
        engine.load(LoadProfile(model_path="/m/base.gguf"))
    show_scheme(qapp, LIGHT)
    panel.editor.setPlainText("The storm ended,")
    with qtbot.waitSignal(panel.session.finished, timeout=HANG_GUARD_MS):
        assert panel.continue_text()

    def generated_colours() -> set[str]:
        block, found = panel.editor.document().begin(), set()
        while block.isValid():
            it = block.begin()
            while not it.atEnd():
                fmt = it.fragment().charFormat()
                if fmt.boolProperty(GENERATED) and it.fragment().text().strip():
                    found.add(fmt.foreground().color().name())
                it += 1
            block = block.next()
        return found

    for scheme in (LIGHT, DARK):
        show_scheme(qapp, scheme)
        _settle()
        colours = generated_colours()
        assert len(colours) == 1, colours
        box = panel.editor.viewport().grab().toImage()
        background = painted_background(box, box.rect())
        assert contrast(QColor(colours.pop()), background) >= AA, scheme
    engine.shutdown()
