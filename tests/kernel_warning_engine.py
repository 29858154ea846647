"""An engine process in which llama.cpp logs a CUDA kernel warning when a reply starts.

A CPU build never prints the warnings that come on first use of a kernel (the CUDA/HIP
"no FlashAttention vector kernel compiled for K/V types ..." line), so this entry point
wraps the real `app.engine.worker.main` and, before each Generate, hands that line to
llama.cpp's own logger (`ggml_log_internal`, what GGML_LOG_WARN expands to). From there
everything is the app's: llama.cpp's log callback, the router, the worker's forwarding,
the pipe, the client. Use it as `EngineProcess(target=main)`.
"""

from __future__ import annotations

import ctypes
from typing import Any

GGML_LOG_LEVEL_WARN = 3  # enum ggml_log_level (ggml.h)
LINE = (
    "ggml_cuda_flash_attn_ext_vec: no FlashAttention vector kernel compiled for K/V types "
    'q8_0-f16, converting K and V to f16 instead (slow). Add "q8_0-f16" to '
    "GGML_CUDA_FA_QUANTS to compile it."
)


def main(*args: Any) -> None:
    """worker.main(*args), with llama.cpp logging LINE as each Generate is handled."""
    import llama_cpp  # before anything that imports numpy, as worker.main does

    from app.engine import engine_loop, worker
    from app.engine.messages import Generate

    # libllama's handle also finds the symbols of the ggml library it links.
    log_internal = llama_cpp.llama_cpp._lib.ggml_log_internal
    handle = engine_loop.Engine.handle

    def handle_logging_first(self: engine_loop.Engine, command: object) -> None:
        if isinstance(command, Generate):
            log_internal(ctypes.c_int(GGML_LOG_LEVEL_WARN), b"%s\n", LINE.encode())
        handle(self, command)

    engine_loop.Engine.handle = handle_logging_first  # type: ignore[method-assign]
    worker.main(*args)
