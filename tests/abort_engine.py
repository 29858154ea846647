"""An engine process in which llama.cpp gives up (GGML_ASSERT) when it is asked to load.

The files llama.cpp aborts on (a block count of 0 or above its layer limit) are kept from it by
the app's GGUF checks, so this entry point wraps the real `app.engine.worker.main` and, when a
Load arrives, calls llama.cpp's own `ggml_abort` with the message GGML_ASSERT writes for a block
count of 0. From there everything is real: ggml's abort handler (its backtrace, unless turned
off), SIGABRT, the stderr capture, the crash report. Use it as `EngineProcess(target=main)`.
"""

from __future__ import annotations

import ctypes
from typing import Any

SOURCE = b"/tmp/pip-build/vendor/llama.cpp/src/llama-model.cpp"
LINE = 1328
ASSERTION = b"hparams.n_layer_all > 0 && hparams.n_layer_all <= LLAMA_MAX_LAYERS"
SAID = f"llama-model.cpp:{LINE}: GGML_ASSERT({ASSERTION.decode()}) failed"  # as the report says


def main(*args: Any) -> None:
    """worker.main(*args), with llama.cpp aborting when a Load is handled."""
    import llama_cpp  # before anything that imports numpy, as worker.main does

    from app.engine import engine_loop, worker
    from app.engine.messages import Load

    # libllama's handle also finds the symbols of the ggml library it links.
    ggml_abort = llama_cpp.llama_cpp._lib.ggml_abort
    handle = engine_loop.Engine.handle

    def handle_aborting_on_load(self: engine_loop.Engine, command: object) -> None:
        if isinstance(command, Load):
            ggml_abort(SOURCE, ctypes.c_int(LINE), b"GGML_ASSERT(%s) failed", ASSERTION)
        handle(self, command)

    engine_loop.Engine.handle = handle_aborting_on_load  # type: ignore[method-assign]
    worker.main(*args)
