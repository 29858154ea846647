"""Create real llama.cpp contexts (CPU) and read back what llama.cpp logged about them.

Used by the KV and fit tests: a model is loaded once, and each context is created and
freed right away; the `llama_kv_cache: size = ...` and compute buffer lines are parsed
with app.engine.log_parse.
"""

from __future__ import annotations

from pathlib import Path

import llama_cpp

from app.engine.llama_log import install as install_llama_log
from app.engine.log_parse import ParsedLog, parse_log
from app.kv.kv_types import KvMode


class LlamaContextLab:
    """Loads models once and creates llama.cpp contexts, returning their KV log lines."""

    def __init__(self) -> None:
        llama_cpp.llama_backend_init()
        self.router = install_llama_log()
        self.models: dict[Path, object] = {}

    def model(self, path: Path) -> object:
        if path not in self.models:
            params = llama_cpp.llama_model_default_params()
            params.n_gpu_layers = 0
            model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
            assert model, f"llama.cpp could not load {path}"
            self.models[path] = model
        return self.models[path]

    def kv_lines(self, path: Path, n_ctx: int, mode: KvMode, **options: object) -> list:
        """The KvCacheInfo of each cache llama.cpp created (its log lines, parsed)."""
        return self.context_log(path, n_ctx, mode, **options).kv_caches

    def context_log(
        self,
        path: Path,
        n_ctx: int,
        mode: KvMode,
        n_seq: int = 1,
        n_ubatch: int = 512,
        n_batch: int = 512,
        swa_full: bool = False,
        flash_attn: bool = True,
        kv_unified: bool = False,
    ) -> ParsedLog:
        model = self.model(path)
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = n_batch
        params.n_ubatch = n_ubatch
        params.n_seq_max = n_seq
        params.n_threads = params.n_threads_batch = 1
        params.type_k = mode.k.ggml_id
        params.type_v = mode.v.ggml_id
        params.flash_attn_type = (
            llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
            if flash_attn
            else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        )
        params.swa_full = swa_full
        params.kv_unified = kv_unified
        self.router.flush()
        self.router.take_lines()
        ctx = llama_cpp.llama_init_from_model(model, params)
        assert ctx, f"llama.cpp refused the context: {self.router.take_lines()[-5:]}"
        llama_cpp.llama_free(ctx)
        self.router.flush()
        return parse_log(self.router.take_lines())

    def close(self) -> None:
        for model in self.models.values():
            llama_cpp.llama_model_free(model)
        self.models.clear()
