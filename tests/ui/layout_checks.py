"""What "the window fits" means in the layout tests: the window really takes the size asked for,
no visible widget is squeezed below its minimum size hint, and the actions a user needs on a page
are on screen in full (not cut by a parent, not outside the window)."""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QApplication,
    QLineEdit,
    QSizePolicy,
    QWidget,
)

# Sizes the issue names: the smallest window we support and a common desktop.
SMALL = QSize(1024, 640)
LARGE = QSize(1920, 1080)


def show_at(window: QWidget, size: QSize) -> None:
    """Resize a shown window and let the layouts settle."""
    window.resize(size)
    for _ in range(3):  # layouts that depend on other layouts need a few passes
        QApplication.processEvents()


def _inside_scroll_area(widget: QWidget) -> bool:
    # A widget inside a scroll area keeps its size and scrolls: that is not clipping.
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QAbstractScrollArea) and parent.viewport().isAncestorOf(widget):
            return True
        parent = parent.parentWidget()
    return False


def squeezed_widgets(window: QWidget) -> list[str]:
    """Visible widgets smaller than their minimum size hint, as "Class 'name' w x h < w x h"."""
    found = []
    for widget in window.findChildren(QWidget):
        if not widget.isVisible() or widget.isWindow() or _inside_scroll_area(widget):
            continue
        if widget.objectName().startswith("qt_") or isinstance(
            widget.parentWidget(), (QAbstractScrollArea, QLineEdit)
        ):
            # Qt's own parts (a spin box's editor, a table's header, a line edit's clear
            # button: always 22x18 below 34 px of height) size themselves
            continue
        hint = widget.minimumSizeHint().expandedTo(widget.minimumSize())
        policy = widget.sizePolicy()
        ignored = QSizePolicy.Policy.Ignored
        short_w = hint.width() > 0 and widget.width() < hint.width()
        short_h = hint.height() > 0 and widget.height() < hint.height()
        if (short_w and policy.horizontalPolicy() != ignored) or (
            short_h and policy.verticalPolicy() != ignored
        ):
            found.append(
                f"{type(widget).__name__} {widget.objectName()!r} "
                f"{widget.width()}x{widget.height()} < {hint.width()}x{hint.height()}"
            )
    return found


def fully_on_screen(widget: QWidget) -> bool:
    """True when the widget is shown and none of it is cut off by its parents or the window."""
    if not widget.isVisible() or widget.width() <= 0 or widget.height() <= 0:
        return False
    window = widget.window()
    top_left = widget.mapTo(window, widget.rect().topLeft())
    rect = QRect(top_left, widget.size())
    parent = widget.parentWidget()
    while parent is not None and parent is not window:
        parent_rect = QRect(parent.mapTo(window, parent.rect().topLeft()), parent.size())
        if not parent_rect.contains(rect):
            return False
        parent = parent.parentWidget()
    return window.rect().contains(rect)


def layout_problems(window: QWidget, size: QSize, actions: list[QWidget]) -> list[str]:
    """Everything wrong with the window at this size; an empty list means it fits."""
    show_at(window, size)
    problems = []
    if window.size() != size:
        problems.append(
            f"window is {window.width()}x{window.height()}, not {size.width()}x{size.height()} "
            f"(minimum size hint {window.minimumSizeHint().width()}x"
            f"{window.minimumSizeHint().height()})"
        )
    problems += [f"squeezed: {text}" for text in squeezed_widgets(window)]
    for action in actions:
        if not fully_on_screen(action):
            label = getattr(action, "text", lambda: "")() or action.objectName()
            problems.append(f"not fully on screen: {type(action).__name__} {label!r}")
    return problems
