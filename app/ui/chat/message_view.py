"""The message list: a QListView over MessageListModel, painted by MessageDelegate.

Only visible rows are painted; when a streamed row grows a line, the view re-lays out
from cached heights (no re-render of other rows) and follows the bottom if the user was
already there. Scrolling within a screen of the top puts the model's older messages in front,
with what the user was reading kept in place.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt, QTimer
from PySide6.QtGui import QFocusEvent, QKeyEvent, QResizeEvent
from PySide6.QtWidgets import QAbstractItemView, QListView, QStyleOptionViewItem, QWidget

from app.ui.chat.message_delegate import MessageDelegate
from app.ui.chat.message_editor import MessageEditor
from app.ui.chat.message_focus import FocusStop, activate, focus_rect, focus_targets
from app.ui.chat.message_model import MessageListModel

log = logging.getLogger(__name__)


class MessageView(QListView):
    def __init__(self, model: MessageListModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.editor: MessageEditor | None = None  # in the bubble of the message being edited
        self.setObjectName("messageView")
        self.delegate = MessageDelegate(self)
        self.setItemDelegate(self.delegate)
        self.setModel(model)
        self.delegate.read_versions_from(model)
        self._model = model
        self.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.verticalScrollBar().setSingleStep(24)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        # Tab reaches the messages and their buttons (message_focus.py); a click does not
        # take the focus from the input.
        self.setFocusPolicy(Qt.FocusPolicy.TabFocus)
        self.focus_stop: FocusStop | None = None  # where the keyboard is, while focused
        self.setResizeMode(QListView.ResizeMode.Adjust)
        self.setUniformItemSizes(False)
        self.setMouseTracking(True)
        self.setFrameShape(QListView.Shape.NoFrame)
        self.setViewportMargins(0, 10, 0, 6)
        self._follow = True  # stay at the bottom while the user has not scrolled up
        # From a model reset until it shows the bottom: scroll values meanwhile are the layout
        # settling, not the user scrolling up (no older messages are loaded for them).
        self._opening = False
        # Row heights the layout was last told about (visualRect asks the delegate live,
        # so it cannot tell us whether the layout is stale).
        self._laid_out: dict[int, int] = {}
        # QListView re-lays out on height changes only (flow is top to bottom); a new
        # width re-wraps every message, so re-lay out once the resizing has settled.
        self._relayout_timer = QTimer(self, singleShot=True, interval=120)
        self._relayout_timer.timeout.connect(self._relayout)
        self.verticalScrollBar().valueChanged.connect(self._on_scrolled)
        model.rowsInserted.connect(self._on_rows_inserted)
        model.modelReset.connect(self._on_model_reset)

    @property
    def messages(self) -> MessageListModel:
        """The conversation's messages the view shows."""
        return self._model

    @property
    def opening(self) -> bool:
        """True from a model reset (a conversation opened) until the view shows its newest
        message; a paint after that shows the opened conversation."""
        return self._opening

    def _at_bottom(self) -> bool:
        bar = self.verticalScrollBar()
        return bar.value() >= bar.maximum() - 8

    def _on_scrolled(self, value: int) -> None:
        self._follow = self._at_bottom()
        near_top = value < self.verticalScrollBar().pageStep()
        if near_top and self._model.has_older and not self._opening:
            self._load_older()

    def _load_older(self) -> None:
        bar = self.verticalScrollBar()
        value, maximum = bar.value(), bar.maximum()
        if not self._model.load_older():
            return
        self.executeDelayedItemsLayout()
        self.updateGeometries()
        # The rows above grew the range by their height: move by as much, so the rows the
        # user was reading stay where they were (this re-enters _on_scrolled, which loads
        # another batch while that is still within a screen of the top).
        bar.setValue(value + bar.maximum() - maximum)

    def _scroll_down_later(self) -> None:
        if self._follow:
            # After the delayed layout has run, not before it. The view is the timer's
            # context, so a view closed meanwhile cancels it instead of being called dead.
            QTimer.singleShot(0, self, self._scroll_to_bottom)

    def _scroll_to_bottom(self) -> None:
        self.executeDelayedItemsLayout()
        self.updateGeometries()  # the scroll range is stale after a delayed re-layout
        self.scrollToBottom()
        self._opening = False

    def resizeEvent(self, event: QResizeEvent) -> None:
        follow = self._follow
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self._follow = follow
            self._relayout_timer.start()

    def _relayout(self) -> None:
        follow = self._follow
        self._laid_out.clear()
        if self.editor is not None:  # the new width wraps its text anew; it stays in sight
            self._fit_editor()
            return
        self.scheduleDelayedItemsLayout()
        self.executeDelayedItemsLayout()
        self.updateGeometries()
        self._follow = follow
        self._scroll_down_later()

    def _on_model_reset(self) -> None:
        self._laid_out.clear()
        self._follow = True
        self._opening = True
        self._scroll_down_later()

    def _on_rows_inserted(self, _parent: QModelIndex, first: int, last: int) -> None:
        option = QStyleOptionViewItem()
        for row in range(first, last + 1):
            index = self._model.index(row)
            self._laid_out[self._model.message_at(row).id] = self.delegate.sizeHint(
                option, index
            ).height()
        self._scroll_down_later()

    def dataChanged(
        self,
        top: QModelIndex | QPersistentModelIndex,
        bottom: QModelIndex | QPersistentModelIndex,
        roles: Sequence[int] = (),
    ) -> None:
        # QListView's own dataChanged re-lays out every row (2,000 sizeHint calls) for
        # each streamed token. Repaint the changed row instead; re-lay out (from cached
        # heights) only when its height really changed.
        follow = self._follow
        option = QStyleOptionViewItem()
        for row in range(top.row(), bottom.row() + 1):
            index = self._model.index(row)
            message_id = self._model.message_at(row).id
            height = self.delegate.sizeHint(option, index).height()
            if self._laid_out.get(message_id) != height:
                self._laid_out[message_id] = height
                # Qt's delayed layout, not sizeHintChanged: Qt 6 answers that signal with a
                # queued doItemsLayout, which executeDelayedItemsLayout cannot run early, so
                # until the event loop turned, indexAt still saw the old row heights while
                # visualRect saw the new ones (a click at a moved button hit nothing).
                self.scheduleDelayedItemsLayout()
            else:
                self.viewport().update(self.visualRect(index))
        self._follow = follow
        self._scroll_down_later()

    # ---- editing a message in place (message_editor.py) -------------------------------------

    def open_editor(self, message_id: int, text: str) -> MessageEditor | None:
        """Turn the message's bubble into an editor of `text`, with the focus in it."""
        self.close_editor()
        row = self._model.row_of(message_id)
        if row is None:
            return None
        self.editor = MessageEditor(text, self.viewport())
        self.editor.height_changed.connect(self._fit_editor)
        self.delegate.editing_id = message_id
        self._fit_editor()
        self.editor.show()
        self.editor.text_box.setFocus(Qt.FocusReason.OtherFocusReason)
        return self.editor

    def close_editor(self) -> None:
        """The message as it is painted again (its buttons back under it)."""
        editor, self.editor = self.editor, None
        if editor is None:
            return
        self.delegate.editing_id = None
        editor.hide()
        editor.deleteLater()
        self._lay_out_rows()

    def _editor_width(self) -> int:
        return self.delegate.column_width(self.viewport().width())

    def _fit_editor(self) -> None:
        """Make the edited row as high as its editor wants, and put the editor in its bubble."""
        if self.editor is None or self.delegate.editing_id is None:
            return
        # The bubble's highlighted border goes round it: 2 px each side (_place_editor).
        self.delegate.editor_height = self.editor.height_for(self._editor_width() - 4) + 4
        self._lay_out_rows()
        row = self._model.row_of(self.delegate.editing_id)
        if row is not None:
            self.scrollTo(self._model.index(row))
        self._place_editor()

    def _lay_out_rows(self) -> None:
        self.scheduleDelayedItemsLayout()
        self.executeDelayedItemsLayout()
        self.updateGeometries()

    def _place_editor(self) -> None:
        editing = self.delegate.editing_id
        row = self._model.row_of(editing) if editing is not None else None
        if self.editor is None:
            return
        if row is None:  # the message left the view (its conversation closed)
            self.close_editor()
            return
        index = self._model.index(row)
        bubble = self.delegate.bubble_and_buttons(self.visualRect(index), index)[0]
        self.editor.setGeometry(bubble.adjusted(2, 2, -2, -2))

    def updateGeometries(self) -> None:
        super().updateGeometries()
        self._place_editor()

    def scrollContentsBy(self, dx: int, dy: int) -> None:
        super().scrollContentsBy(dx, dy)
        self._place_editor()

    # ---- the keyboard (message_focus.py) ----------------------------------------------------

    def _stops(self, row: int) -> list[FocusStop]:
        index = self._model.index(row)
        message_id = self._model.message_at(row).id
        targets = focus_targets(self.delegate, self.visualRect(index), index)
        return [(message_id, target) for target in targets]

    def _row_of_stop(self) -> int | None:
        if self.focus_stop is None:
            return None
        return self._model.row_of(self.focus_stop[0])

    def _move_focus(self, forward: bool) -> bool:
        """The next (or previous) stop; False when there is none this way (focus leaves)."""
        rows = self._model.rowCount()
        row = self._row_of_stop()
        if row is None:
            if not rows:
                return False
            row = 0 if forward else rows - 1
            stops = self._stops(row)
            return self._set_stop(stops[0] if forward else stops[-1])
        stops = self._stops(row)
        at = stops.index(self.focus_stop) if self.focus_stop in stops else 0
        at += 1 if forward else -1
        if 0 <= at < len(stops):
            return self._set_stop(stops[at])
        row += 1 if forward else -1
        if not 0 <= row < rows:
            return False
        stops = self._stops(row)
        return self._set_stop(stops[0] if forward else stops[-1])

    def _set_stop(self, stop: FocusStop | None) -> bool:
        self.focus_stop = stop
        self.delegate.focus = stop if self.hasFocus() else None
        row = self._row_of_stop()
        if stop is not None and row is not None:
            index = self._model.index(row)
            self.scrollTo(index)
            ring = focus_rect(self.delegate, self.visualRect(index), index, stop[1])
            if ring is not None and not self.viewport().rect().contains(ring):
                bar = self.verticalScrollBar()  # a tall message: bring its button into view
                bar.setValue(bar.value() + ring.bottom() - self.viewport().height() + 12)
        self.viewport().update()
        return True

    def focusNextPrevChild(self, next: bool) -> bool:  # noqa: A002 - Qt's name
        if self.hasFocus() and self._move_focus(next):
            return True
        self._set_stop(None)
        return super().focusNextPrevChild(next)

    def focusInEvent(self, event: QFocusEvent) -> None:
        super().focusInEvent(event)
        reason = event.reason()
        if reason == Qt.FocusReason.TabFocusReason:
            self.focus_stop = None
            self._move_focus(True)
        elif reason == Qt.FocusReason.BacktabFocusReason:
            self.focus_stop = None
            self._move_focus(False)
        else:
            self._set_stop(self.focus_stop)

    def focusOutEvent(self, event: QFocusEvent) -> None:
        super().focusOutEvent(event)
        self.delegate.focus = None
        self.viewport().update()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key, row = event.key(), self._row_of_stop()
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Space) and row is not None:
            assert self.focus_stop is not None
            index = self._model.index(row)
            activate(self.delegate, self.visualRect(index), index, self.focus_stop[1])
            if self.focus_stop not in self._stops(row):  # that button went (Regenerate)
                self._set_stop((self.focus_stop[0], ""))
            return
        if key in (Qt.Key.Key_Up, Qt.Key.Key_Down) and self._model.rowCount():
            step = -1 if key == Qt.Key.Key_Up else 1
            row = max(0, min(self._model.rowCount() - 1, (row if row is not None else -1) + step))
            self._set_stop((self._model.message_at(row).id, ""))
            return
        super().keyPressEvent(event)
