"""The conversation by keyboard: Tab stops at each message, then at its code blocks' Copy
buttons and its own buttons (Copy, Edit, Regenerate, Continue, the version arrows), in order;
Enter or Space does what a click does; Up and Down go to the message before or after. The
buttons are painted, not widgets (message_actions.py), so the view keeps which one the
keyboard is on, as (message id, target): "" for the message, "code:N" for a code block's
Copy, else the button's name. The delegate draws a ring there while the view has focus."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QRect

from app.ui.chat.message_actions import NEXT, PREVIOUS, VERSION
from app.ui.chat.message_delegate import MessageDelegate
from app.ui.chat.message_model import MessageRole

FocusStop = tuple[int, str]  # (message id, target)


def focus_targets(delegate: MessageDelegate, rect: QRect, index: QModelIndex) -> list[str]:
    """What Tab stops at in this message, in order (an edited one: its editor's own widgets)."""
    if index.data(MessageRole).id == delegate.editing_id:
        return [""]
    code = [f"code:{n}" for n in range(delegate.code_count(rect, index))]
    _bubble, shown = delegate.bubble_and_buttons(rect, index)
    buttons = [b.name for b in shown if b.enabled and b.name != VERSION]
    return ["", *code, *buttons]


def focus_rect(
    delegate: MessageDelegate, rect: QRect, index: QModelIndex, target: str
) -> QRect | None:
    """Where a target is drawn, in the view's coordinates (`rect`: the row's)."""
    if not target:
        return delegate.bubble_and_buttons(rect, index)[0]
    if target.startswith("code:"):
        return delegate.code_copy_rect(rect, index, int(target[5:]))
    return delegate.button_rect(rect, index, target)


def activate(delegate: MessageDelegate, rect: QRect, index: QModelIndex, target: str) -> None:
    """Do what clicking the target does."""
    if target.startswith("code:"):
        delegate.copy_code(rect, index, int(target[5:]))
        return
    message = index.data(MessageRole)
    if target in (PREVIOUS, NEXT):
        step = -1 if target == PREVIOUS else 1
        delegate.version_requested.emit(message.id, message.version + step)
    elif target:
        delegate.action_requested.emit(target, message.id)
