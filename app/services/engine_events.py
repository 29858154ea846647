"""The engine's events as Qt signals (EngineSignals, which EngineClient emits), and one way
for a page to hear them: name a method after the event, then listen.

    class DashboardPage(QWidget):
        def __init__(self, engine: EngineClient) -> None:
            ...
            listen_to_engine(engine, self)

        def on_engine_model_loaded(self, loaded: Loaded) -> None: ...

A listener has any of the methods in HANDLERS; each is connected to the engine's signal of
that event as a bound method, so Qt drops the connection when the listener is deleted (a lambda
that captured the listener would keep calling a deleted widget). What each event carries is in
EngineSignals' docstring. A method named like a handler that is not one is a typo that would
never be called, so it is refused at once.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal


class EngineSignals(QObject):
    """What happens to the engine, as EngineClient reports it on the GUI thread.

    Signals:
        loading_started(LoadProfile): a load was sent (also when a crashed engine is
            restarted to reload the last model before a generate request).
        model_loaded(Loaded): the model is ready; Loaded carries KV cache sizes,
            compute buffers and the kernel warnings parsed from llama.cpp's log.
        load_failed(str): the load failed; one sentence for the user. When the engine
            still holds the model loaded before (kept, or loaded again), the sentence says so
            and model_loaded(that model) follows at once.
        model_unloaded(): the model was unloaded (unload(), or the engine died).
        prompt_started(PromptStarted): the engine began evaluating the reply's prompt;
            `at` is the engine's time.monotonic(), however late this signal is handled.
        context_trimmed(ContextTrimmed): the reply's conversation did not fit the context,
            so its oldest messages were left out (a notice about the conversation, not
            about the kernel).
        token_received(Token): one streamed piece of the reply (request_id, text, n_past, at).
        reply_finished(Finished): the reply ended (stop_reason "stop", "length" or
            "cancelled"), with token counts, time to first token and tokens/s.
        reply_failed(str): the reply could not be generated (or the engine died during it).
        request_failed(str, str): the same with the request_id (first) of the reply that
            failed, also for a reply that was waiting its turn when the engine died.
        request_failure(Failed): the same failure as the engine's Failed (request_id,
            sentence and `code`, e.g. "context_length_exceeded"), for a client that answers
            the kind of failure (the local server: a 400 rather than a 500).
        engine_crashed(str): the engine process died; one sentence (how it ended, the line
            llama.cpp wrote when it gave up) or words plus the tail of its stderr. Nothing
            else is lost: the next request starts a fresh engine and reloads the model,
            unless it died CRASHES_BEFORE_GIVING_UP (app.services.crash_streak) times in a
            row on that model (`gave_up_on` then names it and `last_options` is None).
        kernel_warnings_changed(tuple): every KernelWarning of the current model, as
            objects: llama.cpp said the int8-K kernel is not what runs (K/V pair not
            compiled, converted to f16, Flash Attention off, attention on the CPU). Set
            from Loaded, grown by warnings logged later (first use), emptied when a load
            starts or the model goes away.
        busy_changed(bool): True while loading, generating or running another request.
        event_received(object): any other event (Evaluated, BenchDone, a Failed for a
            request sent with request()), unchanged.
    """

    loading_started = Signal(object)
    model_loaded = Signal(object)
    load_failed = Signal(str)
    model_unloaded = Signal()
    prompt_started = Signal(object)
    context_trimmed = Signal(object)
    token_received = Signal(object)
    reply_finished = Signal(object)
    reply_failed = Signal(str)
    request_failed = Signal(str, str)
    request_failure = Signal(object)  # Failed
    engine_crashed = Signal(str)
    kernel_warnings_changed = Signal(object)  # tuple[KernelWarning, ...]
    busy_changed = Signal(bool)
    event_received = Signal(object)


# handler method -> EngineSignals signal
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


def listen_to_engine(engine: EngineSignals, listener: object) -> None:
    """Connect each of `listener`'s handler methods to the engine's signal of its event."""
    names = dir(type(listener))
    misnamed = [name for name in names if name.startswith("on_engine") and name not in HANDLERS]
    if misnamed:
        raise TypeError(f"{type(listener).__name__} has no engine event for {', '.join(misnamed)}")
    for handler, signal in HANDLERS.items():
        method = getattr(listener, handler, None)
        if method is not None:
            getattr(engine, signal).connect(method)
