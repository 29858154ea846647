"""200 conversations, one of 5,000 messages, in the real chat page: how long opening each takes
(a click in the conversation list until the message view has painted its newest rows) and how
long each page step takes while scrolling the 5,000 messages from the bottom to message 1.

    QT_QPA_PLATFORM=offscreen python benchmarks/long_conversations.py

Targets: every conversation opens in under 300 ms; scrolling stays fluid (95% of page steps,
each a scroll and a full repaint of the view, within a 60 Hz frame, 16.7 ms). Also run by
benchmarks/long_session.py after its load cycles, in the same app session.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

OPEN_TARGET_MS = 300.0
FRAME_MS = 1000 / 60
CONVERSATIONS = 200
LONG = 5000

_WORDS = (
    "the cache keeps keys and values for every token so the model need not compute them "
    "again when it writes the next word memory grows with the context length layers heads"
).split()


@dataclass(frozen=True)
class ConversationTimes:
    open_ms: list[float]  # every conversation, in the order opened
    long_open_ms: float  # the 5,000-message one
    step_ms: list[float]  # page steps from the bottom of the long one to its first message

    def facts(self) -> dict[str, tuple[str, bool]]:
        """What was measured, as (value, whether it met its target)."""
        return {
            f"{CONVERSATIONS} conversations (one of {LONG:,} messages): slowest open "
            f"(target < {OPEN_TARGET_MS:.0f} ms)": (
                f"{max(self.open_ms):.0f} ms (median {statistics.median(self.open_ms):.0f} ms; "
                f"the {LONG:,}-message one {self.long_open_ms:.0f} ms)",
                max(self.open_ms) < OPEN_TARGET_MS,
            ),
            f"{LONG:,} messages scrolled page by page to message 1: step p95 / max "
            f"(target p95 < {FRAME_MS:.1f} ms)": (
                f"{_p95(self.step_ms):.1f} / {max(self.step_ms):.1f} ms over "
                f"{len(self.step_ms)} steps",
                _p95(self.step_ms) < FRAME_MS,
            ),
        }

    def held(self) -> bool:
        return all(ok for _value, ok in self.facts().values())


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(0.95 * (len(ordered) - 1))]


def _reply(rng: random.Random, i: int) -> str:
    """An assistant reply as models write them: paragraphs, sometimes a list or code."""
    paragraphs = [
        " ".join(rng.choice(_WORDS) for _ in range(rng.randint(15, 60))).capitalize() + "."
        for _ in range(rng.randint(1, 3))
    ]
    if i % 5 == 0:
        paragraphs.append("- **one** point\n- `two` points\n- three")
    if i % 7 == 0:
        paragraphs.append("```python\nfor layer in range(32):\n    print(layer)\n```")
    return f"Reply {i}. " + "\n\n".join(paragraphs)


def fill(store, rng: random.Random) -> int:
    """199 conversations of 10 to 60 messages and one of 5,000; returns the long one's id."""
    long_id = 0
    for c in range(CONVERSATIONS):
        n = LONG if c == CONVERSATIONS // 2 else rng.randint(10, 60)
        conversation = store.create_conversation(f"Conversation {c + 1}")
        if n == LONG:
            long_id = conversation.id
        for i in range(1, n + 1):
            if i % 2:
                text = f"Question {i}: " + " ".join(rng.choice(_WORDS) for _ in range(12)) + "?"
                store.add_message(conversation.id, "user", text)
            else:
                store.add_message(conversation.id, "assistant", _reply(rng, i))
    return long_id


class _PaintedNewest:
    """Quits `loop` once the view has painted the conversation it opened at its newest rows."""

    def __init__(self, view, loop) -> None:
        from PySide6.QtCore import QEvent, QObject, QTimer

        self._view = view
        paint = QEvent.Type.Paint
        quit_scheduled: list[bool] = []

        class Filter(QObject):
            def eventFilter(inner, _obj, event) -> bool:  # noqa: N805 - Qt's signature
                if event.type() == paint and not view.opening and not quit_scheduled:
                    quit_scheduled.append(True)
                    QTimer.singleShot(0, loop.quit)  # after this paint has been drawn
                return False

        self._filter = Filter()
        view.viewport().installEventFilter(self._filter)

    def remove(self) -> None:
        self._view.viewport().removeEventFilter(self._filter)


def measure(parts) -> ConversationTimes:
    """Fill the running app's store, then open every conversation and scroll the long one."""
    from PySide6.QtCore import QEventLoop, Qt, QTimer
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QAbstractSlider, QApplication

    rng = random.Random(11)
    page = parts.window.chat
    long_id = fill(parts.store, rng)
    page.conversations.refresh()
    parts.window.show_page("Chat")
    QApplication.processEvents()
    items = page.conversations.list
    view = page.view
    ids = [items.item(r).data(Qt.ItemDataRole.UserRole) for r in range(items.count())]
    open_ms: dict[int, float] = {}
    loop = QEventLoop()
    timeout = QTimer(singleShot=True, interval=10_000)
    timeout.timeout.connect(loop.quit)
    for conversation_id in ids:
        item = next(
            items.item(r)
            for r in range(items.count())
            if items.item(r).data(Qt.ItemDataRole.UserRole) == conversation_id
        )
        items.scrollToItem(item)
        QApplication.processEvents()  # the list has scrolled there before the click
        watch = _PaintedNewest(view, loop)
        timeout.start()
        started = time.perf_counter()
        QTest.mouseClick(
            items.viewport(), Qt.MouseButton.LeftButton, pos=items.visualItemRect(item).center()
        )
        loop.exec()
        open_ms[conversation_id] = (time.perf_counter() - started) * 1000
        timeout.stop()
        watch.remove()

    # The long one last opened at its bottom; scroll to message 1 a page at a time, each step
    # drawn at once (the frame a user would see).
    page.open_conversation(long_id)
    watch = _PaintedNewest(view, loop)
    loop.exec()
    watch.remove()
    bar = view.verticalScrollBar()
    steps: list[float] = []
    while bar.value() > 0:
        started = time.perf_counter()
        bar.triggerAction(QAbstractSlider.SliderAction.SliderPageStepSub)
        view.viewport().repaint()
        steps.append((time.perf_counter() - started) * 1000)
    first = view.model().message_at(0)
    if view.model().has_older or not first.content.startswith("Question 1:"):
        raise SystemExit("scrolling up did not reach the long conversation's first message")
    return ConversationTimes(list(open_ms.values()), open_ms[long_id], steps)


def report(times: ConversationTimes) -> str:
    lines = [
        f"{what}: {value} {'OK' if ok else 'MISSED'}" for what, (value, ok) in times.facts().items()
    ]
    slow = sum(1 for s in times.step_ms if s > FRAME_MS)
    lines.append(f"page steps over one 60 Hz frame: {slow} of {len(times.step_ms)}")
    return "\n".join(lines)


def main() -> int:
    from PySide6.QtWidgets import QApplication

    from app.gui import build_app
    from app.state.settings import SettingsFile

    _app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory(prefix="kvstudio-long-conversations-") as folder:
        SettingsFile(Path(folder)).update(n_ctx=2048, n_threads=2)
        parts = build_app(Path(folder))
        parts.window.resize(1280, 860)
        parts.window.show()
        times = measure(parts)
        print(report(times))
        parts.window.close()
        parts.close()
    return 0 if times.held() else 1


if __name__ == "__main__":
    sys.exit(main())
