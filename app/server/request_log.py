"""One line per API request, for the app's live log, `kvstudio serve`'s summary and logging.

Prompt text is kept only when the user turned request logging on; the API key never is.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

PROMPT_SHOWN_CHARS = 200


@dataclass(frozen=True)
class RequestRecord:
    request_id: str
    at: float  # time.time() when it arrived
    client: str  # the caller's address
    method: str
    path: str
    status: int
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens_per_second: float = 0.0  # decode speed, as the engine measured it
    time_to_first_token_s: float = 0.0  # from the engine's start on it (queueing excluded)
    finish_reason: str = ""  # "stop", "length", "cancelled" (the client went away)
    ended_at: float = 0.0  # the engine's time.monotonic() when it was done with it
    error: str = ""  # the error's sentence for a refused or failed request
    prompt: str = ""  # the start of the prompt, only with request logging on

    def line(self) -> str:
        """The record in words, as the log and the terminal show it."""
        head = f"{self.method} {self.path} {self.status}"
        if self.error:
            return f"{head}: {self.error}"
        if not self.finish_reason:
            return head
        return (
            f"{head}: {self.prompt_tokens} prompt + {self.completion_tokens} tokens, "
            f"{self.tokens_per_second:.1f} t/s, {self.finish_reason}"
        )


class RequestLog:
    """Counts what was served and hands each record to the listeners (from the server's
    thread: a listener that touches widgets hops to its own thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[Callable[[RequestRecord], None]] = []
        self.requests = 0
        self.tokens = 0

    def listen(self, listener: Callable[[RequestRecord], None]) -> None:
        self._listeners.append(listener)

    def add(self, record: RequestRecord) -> None:
        with self._lock:
            self.requests += 1
            self.tokens += record.completion_tokens
        log.info("%s", record.line())
        if record.prompt:
            log.info("%s prompt: %s", record.request_id, record.prompt)
        for listener in self._listeners:
            listener(record)

    def summary(self) -> str:
        with self._lock:
            return f"served {self.requests} request(s), {self.tokens} token(s) generated"
