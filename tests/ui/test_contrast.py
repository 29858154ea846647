"""Every page of the real app, with the starter model loaded, is readable in the light and the
dark look: each text's colour against the background really painted under it is at least 4.5:1
(WCAG AA), for labels, buttons, inputs, spin boxes, tabs, table headers and cells, and the
charts' numbers, axis titles, legends and marker labels (tests/ui/contrast.py measures)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QScrollArea, QWidget

from app.ui.theme import DARK, LIGHT, ThemeController
from tests.ui.contrast import contrast_problems, light_boxes

pytestmark = pytest.mark.slow  # the starter model loads once

PAGES = ("Chat", "Models", "Dashboard", "Backends", "Server", "Settings")


@pytest.fixture(autouse=True)
def app_look_restored(qapp):
    """The theme is app-wide: put back the stylesheet and palette other tests run with."""
    sheet, palette = qapp.styleSheet(), qapp.palette()
    yield
    qapp.setStyleSheet(sheet)
    qapp.setPalette(palette)


def settle() -> None:
    for _ in range(5):
        QApplication.processEvents()


def below_the_fold(window: QWidget) -> list[str]:
    """The problems of what a page's scroll areas hold below the fold, scrolled to the end."""
    problems: list[str] = []
    for area in window.findChildren(QScrollArea):
        bar = area.verticalScrollBar()
        if area.isVisible() and bar.maximum() > 0:
            bar.setValue(bar.maximum())
            settle()
            problems += contrast_problems(window)
            bar.setValue(0)
            settle()
    return problems


def test_every_page_reads_at_aa_contrast_in_both_looks(qtbot, loaded_chat_app) -> None:
    window = loaded_chat_app.window
    window.resize(1280, 800)
    theme = window.findChild(ThemeController)
    found: dict[str, list[str]] = {}
    for scheme in (LIGHT, DARK):
        theme.choose(scheme)
        for title in PAGES:
            window.show_page(title)
            settle()
            problems = contrast_problems(window) + below_the_fold(window)
            if scheme == DARK:
                problems += light_boxes(window)
            if problems:
                found[f"{scheme} {title}"] = problems
    assert found == {}, "\n".join(f"{page}: {p}" for page, ps in found.items() for p in ps)


def test_warnings_errors_and_notes_follow_the_look(qtbot, qapp, chat_app, tmp_path) -> None:
    """The boxes and sentences only some states show: the load dialog's warning for a K/V
    pair the backend lacks and its fit line, the Workers section's warning for a worker on
    the network, its error and its refusal, the token dialog's note and error, the Downloads
    tab's note. Each reads at 4.5:1 in both looks, and in the dark look none sits in a light
    box (they kept the light look's colours: #fff4e5 or #d7f5dd behind them; and palette(mid)
    text read at 1.7:1 in the light look)."""
    from app.engine.build_info import BackendPairs, parse_system_info
    from app.engine.rpc_load_check import WorkersCheck
    from app.platform.errors import AppError
    from app.state.settings import Settings
    from app.ui.chat.load_dialog import LoadDialog
    from app.ui.models.token_dialog import TokenDialog
    from app.ui.theme import show_scheme
    from tests.ui.test_backends_page import DEFAULT_PAIRS_CUDA_LINE
    from tests.waits import HANG_GUARD_MS

    window = chat_app.window
    window.resize(1024, 640)
    pairs = BackendPairs("cuda", parse_system_info(DEFAULT_PAIRS_CUDA_LINE).fa_pairs)
    dialog = LoadDialog("starter", Settings(), tmp_path, pairs, None, window)
    with qtbot.waitSignal(dialog.fit_changed, timeout=HANG_GUARD_MS):  # the fit line's box
        dialog.show()
    box = dialog.workers_box
    box.set_workers(("192.168.1.20:50052",))  # no change signal: nothing is asked of it
    assert not box.add_worker("not an address")  # the error sentence
    box.device_fit.show_result(WorkersCheck(None, "The worker refused.", forceable=False))
    dialog.resize(560, 900)

    def refuse(_token: str) -> None:
        raise AppError("That is not a Hugging Face token.")

    token = TokenDialog("", window, save_fn=refuse, describe_fn=lambda: "hf_…wxyz")
    token.token_edit.setText("not a token")
    token.show()
    token.buttons.button(token.buttons.StandardButton.Save).click()
    shown = {
        "load dialog": (
            dialog,
            [dialog.pair_warning, dialog.fit_label, box.exposure, box.error, box.sentence],
        ),
        "token dialog": (token, [token.current_label, token.error_label]),
        "Downloads": (chat_app.pages.models, [chat_app.pages.models.downloads_view.empty_label]),
    }
    found: dict[str, list[str]] = {}
    for scheme in (LIGHT, DARK):
        show_scheme(qapp, scheme)
        window.show_page("Models")
        chat_app.pages.models.tabs.setCurrentIndex(chat_app.pages.models.TAB_DOWNLOADS)
        settle()
        for name, (root, labels) in shown.items():
            assert all(label.isVisible() and label.text() for label in labels), name
            problems = contrast_problems(root) + (light_boxes(root) if scheme == DARK else [])
            if problems:
                found[f"{scheme} {name}"] = problems
    token.reject()
    dialog.reject()
    assert found == {}, "\n".join(f"{what}: {p}" for what, ps in found.items() for p in ps)


def test_dark_spin_box_arrows_stand_out(qtbot, qapp) -> None:
    """Spin-box arrows are controls: WCAG asks 3:1 for them against what surrounds them. In
    the dark look Fusion drew them in a shade of the window colour (about 1.3:1)."""
    from PySide6.QtWidgets import QSpinBox, QStyle, QStyleOptionSpinBox

    from app.ui.theme import show_scheme
    from tests.ui.contrast import contrast, painted_background

    show_scheme(qapp, DARK)
    box = QSpinBox()
    box.setRange(0, 10)
    box.setValue(5)
    box.resize(140, 30)
    qtbot.addWidget(box)
    box.show()
    settle()
    image = box.grab().toImage()
    option = QStyleOptionSpinBox()
    box.initStyleOption(option)
    for part in (QStyle.SubControl.SC_SpinBoxUp, QStyle.SubControl.SC_SpinBoxDown):
        rect = box.style().subControlRect(QStyle.ComplexControl.CC_SpinBox, option, part, box)
        background = painted_background(image, rect)
        strongest = max(
            contrast(QColor(image.pixel(x, y)), background)
            for x in range(rect.left(), rect.right() + 1)
            for y in range(rect.top(), rect.bottom() + 1)
        )
        assert strongest >= 3.0, (part, strongest)


def test_the_base_model_notes_buttons_are_the_apps_secondary_buttons(qtbot, qapp) -> None:
    """The note's Download and mode buttons were Fusion's grey gradient in the light look,
    beside the app's flat white ones (Chat settings, Regenerate): they are drawn as those
    now, in each look, with their text at 4.5:1."""
    from PySide6.QtWidgets import QPushButton, QVBoxLayout

    from app.ui.chat.base_model_note import IN_CHAT, BaseModelNote
    from app.ui.theme import show_scheme
    from tests.ui.contrast import painted_background

    holder = QWidget()
    note = BaseModelNote(IN_CHAT, "Text continuation")
    regenerate = QPushButton("Regenerate")
    regenerate.setObjectName("regenerateButton")  # one of the app's secondary buttons
    layout = QVBoxLayout(holder)
    layout.addWidget(note)
    layout.addWidget(regenerate)
    qtbot.addWidget(holder)
    holder.resize(900, 200)
    holder.show()
    for scheme in (LIGHT, DARK):
        show_scheme(qapp, scheme)
        settle()
        image = holder.grab().toImage()
        fills = []
        for button in (regenerate, note.download_button, note.switch_button):
            rect = button.geometry().translated(button.parentWidget().mapTo(holder, QPoint()))
            fills.append(painted_background(image, rect.adjusted(3, 3, -3, -3)).name())
        assert fills == [fills[0]] * 3, (scheme, fills)  # as the app's own secondary button
        assert contrast_problems(holder) == [], scheme


def test_verdict_cells_take_the_looks_shades(qtbot, qapp) -> None:
    """A verdict cell (the file tree, the picked file's table, the Recommended list) was a
    light green, yellow or red box in the dark look too: drawn through VerdictDelegate it
    takes the dark look's shades there, its words at 4.5:1 on them in both looks."""
    from PySide6.QtWidgets import (
        QStyledItemDelegate,
        QStyleOptionViewItem,
        QTableWidget,
        QTableWidgetItem,
    )

    from app.kv.fit import FITS, NO_FIT, TIGHT, UNSUPPORTED
    from app.ui.models.verdicts import VerdictDelegate, paint_verdict
    from app.ui.theme import show_scheme
    from tests.ui.contrast import DARK_LOOK_BRIGHTEST, contrast, luminance, painted_background

    verdicts = (FITS, TIGHT, NO_FIT, UNSUPPORTED)
    table = QTableWidget(len(verdicts), 1)
    table.setItemDelegateForColumn(0, VerdictDelegate(table))
    for row, verdict in enumerate(verdicts):
        item = QTableWidgetItem(verdict)
        paint_verdict(item, verdict)
        table.setItem(row, 0, item)
    qtbot.addWidget(table)
    table.resize(300, 200)
    table.show()
    for scheme in (LIGHT, DARK):
        show_scheme(qapp, scheme)
        settle()
        image = table.viewport().grab().toImage()
        for row, verdict in enumerate(verdicts):
            index = table.model().index(row, 0)
            option = QStyleOptionViewItem()
            table.initViewItemOption(option)
            delegate = table.itemDelegateForColumn(0)
            assert isinstance(delegate, QStyledItemDelegate), delegate
            delegate.initStyleOption(option, index)
            text = option.palette.color(QPalette.ColorRole.Text)
            background = painted_background(image, table.visualRect(index).adjusted(2, 2, -2, -2))
            assert contrast(text, background) >= 4.5, (scheme, verdict)
            if scheme == DARK:
                assert luminance(background) <= DARK_LOOK_BRIGHTEST, (verdict, background.name())


def test_a_message_edited_in_place_reads_at_aa_in_both_looks(qtbot, qapp, chat_app) -> None:
    """The editor in an edited message's bubble: its text, what the keys do, Cancel and
    Resend, at 4.5:1 on what is painted under them, and no light box in the dark look."""
    from app.ui.theme import show_scheme

    window = chat_app.window
    page = window.chat
    conversation = page.session.new_conversation()
    user = chat_app.store.add_message(conversation.id, "user", "Fix this sentence, please.")
    chat_app.store.add_message(conversation.id, "assistant", "Fixed.")
    page.open_conversation(conversation.id)
    window.resize(1024, 640)
    window.show_page("Chat")
    page.start_edit(user.id)
    editor = page.view.editor
    assert editor is not None
    found: dict[str, list[str]] = {}
    for scheme in (LIGHT, DARK):
        show_scheme(qapp, scheme)
        settle()
        assert editor.keys.isVisible() and editor.resend_button.isVisible()
        problems = contrast_problems(editor) + (light_boxes(editor) if scheme == DARK else [])
        if problems:
            found[scheme] = problems
    assert found == {}, found
