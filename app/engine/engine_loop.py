"""The engine's loop: owns the one llama_cpp.Llama and answers commands until Shutdown or EOF.

Imported by app/engine/worker.py's main once llama_cpp is (it imports numpy through the GGUF
code). Every failure becomes a Failed event, never an exit.
"""

from __future__ import annotations

import importlib
import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from multiprocessing.connection import Connection

from app.engine import llama_log
from app.engine.cancel import CancelCheck
from app.engine.generation import run_generation
from app.engine.llama_log import LlamaLogRouter
from app.engine.loader import LoadedModel, check_loadable, load_model
from app.engine.log_parse import classify_warning
from app.engine.messages import (
    Bench,
    Evaluate,
    Failed,
    Generate,
    Load,
    Shutdown,
    TemplateFallback,
    Unload,
)
from app.platform.errors import AppError
from app.platform.heap import give_memory_back

log = logging.getLogger(__name__)


def serve(
    commands: Connection[object, object], events: Connection[object, object], cancel: CancelCheck
) -> None:
    """Answer `commands` (a pipe's receiving end) with `events` until Shutdown or EOF."""
    router = llama_log.install()
    engine = Engine(events.send, cancel, router)
    try:
        while True:
            try:
                command = commands.recv()
            except (EOFError, OSError):
                break  # the parent went away
            if isinstance(command, Shutdown):
                break
            engine.handle(command)
    finally:
        engine.unload()


class Engine:
    """Dispatches commands; every failure becomes a Failed event, never an exit."""

    def __init__(
        self, emit: Callable[[object], None], cancel: CancelCheck, router: LlamaLogRouter
    ) -> None:
        self.emit = emit
        self.cancel = cancel
        self.router = router
        self.model: LoadedModel | None = None

    def handle(self, command: object) -> None:
        request_id = getattr(command, "request_id", None)
        try:
            if isinstance(command, Load):
                self._load(command)
            elif isinstance(command, Generate):
                self._generate(command)
            elif isinstance(command, (Evaluate, Bench)):
                self._measure(command)
            elif isinstance(command, Unload):
                self.unload()
            else:
                self.emit(Failed(f"The engine does not know the command {type(command).__name__}."))
        except Exception as error:  # noqa: BLE001 - the boundary: report, keep serving
            detail = traceback.format_exc()
            if isinstance(error, AppError):
                message = str(error)
                log.warning("%s failed: %s", type(command).__name__, message)
            else:
                message = _sentence(command, error)
                log.error("%s failed: %s", type(command).__name__, detail)
            # The client's to fix (a 400 for the server): the error class names its code.
            named = getattr(error, "code", "") if isinstance(error, AppError) else ""
            code = named if isinstance(named, str) else ""
            self.emit(Failed(message, request_id=request_id, detail=detail, code=code))

    def _load(self, command: Load) -> None:
        """Load a model in place of the loaded one. A file llama.cpp refuses never leaves the
        user without the model they had: refused before anything is dropped, the old one is
        kept; failing later (out of memory), it is loaded again. Either way a Failed with
        `kept` says which model is loaded now."""
        previous = self.model.loaded if self.model is not None else None
        if previous is not None:
            try:
                check_loadable(command.options, self.router)
            except Exception as error:  # noqa: BLE001 - reported with the kept model
                kept = replace(previous, at=time.monotonic())
                message = _load_sentence(command, error)
                log.warning("Load failed: %s (%s stays loaded)", message, previous.model_path)
                self.emit(Failed(message, detail=_detail(), kept=kept))
                return
        self.unload()
        try:
            self.model = load_model(command.options, self.router)
        except Exception as error:
            if previous is None:
                raise
            message, detail = _load_sentence(command, error), _detail()
            log.warning("load failed (%s); loading %s again", message, previous.model_path)
            try:
                self.model = load_model(previous.options, self.router)
            except Exception:
                log.exception("the model loaded before could not be loaded again")
                raise error from None
            self.emit(Failed(message, detail=detail, kept=self.model.loaded, reloaded=True))
            return
        self.emit(self.model.loaded)

    def _generate(self, command: Generate) -> None:
        if self.model is None:
            self.emit(Failed("No model is loaded.", request_id=command.request_id))
            return
        finished = run_generation(
            self.model.llm, command, self.model.template, self.cancel, self._emit_generation
        )
        self._send_new_warnings()
        self.emit(finished)

    def _emit_generation(self, event: object) -> None:
        model = self.model  # set while a generation runs
        if (
            isinstance(event, TemplateFallback)
            and model is not None
            and model.template.fallback is not None
        ):
            # a template that broke a limit once is not tried again on every message
            model.template = model.template.fallback
        self.emit(event)

    def _measure(self, command: Evaluate | Bench) -> None:
        """Evaluate (app.engine.quality) and Bench (app.engine.bench), written elsewhere
        and imported only when asked for."""
        if self.model is None:
            self.emit(Failed("No model is loaded.", request_id=command.request_id))
            return
        module, function = _MEASURES[type(command).__name__]
        try:
            handler = getattr(importlib.import_module(module), function)
        except (ImportError, AttributeError):
            log.exception("%s is not available", module)
            what = "Quality evaluation" if isinstance(command, Evaluate) else "Benchmarking"
            self.emit(Failed(f"{what} is not available in this build.", command.request_id))
            return
        try:
            result = handler(self.model.llm, command, self.cancel)
        finally:
            self.model.llm.reset()  # it used the context; the next reply re-reads its prompt
        self._send_new_warnings()
        self.emit(result)

    def _send_new_warnings(self) -> None:
        """Warnings llama.cpp logs only on first use (e.g. the CUDA K/V conversion)."""
        self.router.flush()
        for line in self.router.take_lines():
            warning = classify_warning(line)
            if warning is not None:
                self.emit(warning)

    def unload(self) -> None:
        if self.model is not None:
            llm, self.model = self.model.llm, None
            llm.close()
            give_memory_back()  # the closed model's heap pages, back to the system


_MEASURES = {
    "Evaluate": ("app.engine.quality", "evaluate"),
    "Bench": ("app.engine.bench", "run_bench"),
}


def _load_sentence(command: Load, error: Exception) -> str:
    return str(error) if isinstance(error, AppError) else _sentence(command, error)


def _detail() -> str:
    return traceback.format_exc()


def _sentence(command: object, error: Exception) -> str:
    what = {
        "Load": "Loading the model",
        "Generate": "Generating",
        "Evaluate": "Evaluating",
        "Bench": "The speed measurement",
    }
    action = what.get(type(command).__name__, "The engine")
    return f"{action} failed: {error}."
