"""One way for a page to hear the engine: name a method after the event, then listen.

    class DashboardPage(QWidget):
        def __init__(self, engine: EngineClient) -> None:
            ...
            listen_to_engine(engine, self)

        def on_engine_model_loaded(self, loaded: Loaded) -> None: ...

A listener has any of the methods in HANDLERS; each is connected to the EngineClient signal of
that event as a bound method, so Qt drops the connection when the listener is deleted (a lambda
that captured the listener would keep calling a deleted widget). What each event carries is in
EngineClient's docstring. A method named like a handler that is not one is a typo that would
never be called, so it is refused at once.
"""

from __future__ import annotations

from app.services.engine_client import EngineClient

# handler method -> EngineClient signal
HANDLERS = {
    "on_engine_loading_started": "loading_started",  # (LoadProfile)
    "on_engine_model_loaded": "model_loaded",  # (Loaded)
    "on_engine_load_failed": "load_failed",  # (sentence)
    "on_engine_model_unloaded": "model_unloaded",  # ()
    "on_engine_prompt_started": "prompt_started",  # (PromptStarted)
    "on_engine_context_trimmed": "context_trimmed",  # (ContextTrimmed)
    "on_engine_token": "token_received",  # (Token)
    "on_engine_reply_finished": "reply_finished",  # (Finished)
    "on_engine_reply_failed": "reply_failed",  # (sentence)
    "on_engine_request_failed": "request_failed",  # (request_id, sentence)
    "on_engine_crashed": "engine_crashed",  # (sentence)
    "on_engine_kernel_warnings": "kernel_warnings_changed",  # (tuple of KernelWarning)
    "on_engine_busy": "busy_changed",  # (bool)
    "on_engine_event": "event_received",  # (any other event)
}


def listen_to_engine(engine: EngineClient, listener: object) -> None:
    """Connect each of `listener`'s handler methods to the engine's signal of its event."""
    names = dir(type(listener))
    misnamed = [name for name in names if name.startswith("on_engine") and name not in HANDLERS]
    if misnamed:
        raise TypeError(f"{type(listener).__name__} has no engine event for {', '.join(misnamed)}")
    for handler, signal in HANDLERS.items():
        method = getattr(listener, handler, None)
        if method is not None:
            getattr(engine, signal).connect(method)
