"""The reply being generated, saved as it streams: a kill loses at most a moment of its text."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Unpack

from app.chats.records import Message, ReplyStats
from app.chats.store import ChatStore

# The store's logger, as before this class had its own module: `kvstudio -v` users (and
# tests/ui/test_app_killed.py) read "app.chats.store: saved N characters of reply M".
log = logging.getLogger("app.chats.store")


class StreamingReply:
    """The reply being generated: text accumulates in memory and is written to its
    message row at most every `interval` seconds (and on flush/finish), so a kill loses
    at most `interval` seconds of text. Call flush() from a timer when tokens may pause.
    """

    def __init__(
        self,
        store: ChatStore,
        message_id: int,
        text: str = "",
        interval: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self.message_id = message_id
        self.text = text
        self._interval = interval
        self._clock = clock
        self._written = len(text)
        self._last_write = clock()

    def append(self, piece: str) -> None:
        self.text += piece
        if self._clock() - self._last_write >= self._interval:
            self.flush()

    def flush(self) -> None:
        if len(self.text) != self._written:
            self._store.update_message(self.message_id, self.text)
            self._written = len(self.text)
            # Committed: a crash from here on keeps this much (`kvstudio -v` shows it).
            log.debug("saved %d characters of reply %d", self._written, self.message_id)
        self._last_write = self._clock()

    def finish(self, status: str, **stats: Unpack[ReplyStats]) -> Message:
        return self._store.finish_message(self.message_id, self.text, status, **stats)
