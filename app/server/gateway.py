"""The engine as the server sees it: what is loaded, and a queue to generate through.

Two implementations: process_gateway.ProcessGateway over an EngineProcess (`kvstudio serve`)
and app/services/server_gateway.ClientGateway over the app's EngineClient (the chat's queue).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from app.engine.messages import Finished, Generate, Loaded
from app.kv.kv_types import KvMode

# Called from any thread with the request's PromptStarted, Token, and last its one Finished
# or Failed (app.engine.messages).
EventSink = Callable[[object], None]


def cancelled_before_start(request_id: str) -> Finished:
    """The Finished of a request dropped before the engine ran it: nothing was generated."""
    return Finished(request_id, "", 0, 0, 0.0, 0.0, "cancelled", 0, time.monotonic())


@dataclass(frozen=True)
class ModelInfo:
    """The loaded model as GET /v1/models names it."""

    id: str  # the file's name without .gguf
    path: str
    n_ctx: int
    kv_mode: KvMode
    kv_bytes: int  # what llama.cpp allocated for the KV cache
    created: int  # unix time of the load
    base_model: str = ""  # why it looks like a base model (Loaded.base_model); "": a chat model

    @classmethod
    def from_loaded(cls, loaded: Loaded, created: int) -> ModelInfo:
        return cls(
            id=Path(loaded.model_path).name.removesuffix(".gguf"),
            path=loaded.model_path,
            n_ctx=loaded.n_ctx,
            kv_mode=loaded.options.kv,
            kv_bytes=sum(cache.total_bytes for cache in loaded.kv_caches),
            created=created,
            base_model=loaded.base_model,
        )


class EngineGateway(Protocol):
    def model(self) -> ModelInfo | None:
        """The model loaded now (None: none). Safe from any thread."""
        ...

    def health(self) -> str:
        """Why the server cannot answer now, in a sentence (loading, the engine stopped);
        "" when a model is loaded and the engine runs. Safe from any thread."""
        ...

    def submit(self, command: Generate, sink: EventSink) -> None:
        """Generate after every request submitted before it (arrival order); `sink` gets
        its events from any thread, ending with exactly one Finished or Failed."""
        ...

    def cancel(self, request_id: str) -> None:
        """Stop that request (the engine's cancel flag when it runs, dropped when it waits);
        its Finished says 'cancelled'. Safe from any thread; unknown ids are ignored."""
        ...
