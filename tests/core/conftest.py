"""Fixtures shared by the core tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gguf_factory import write_tiny_gguf


@pytest.fixture(scope="session")
def gqa_llama(tmp_path_factory) -> Path:
    """A tiny llama-shaped GGUF with grouped-query attention (8 heads, 2 KV heads of 128),
    4 layers, trained for 131,072 tokens: the fit and load-check arithmetic's test model."""
    return write_tiny_gguf(
        tmp_path_factory.mktemp("gqa-llama") / "tiny.gguf",
        arch="llama",
        n_layer=4,
        n_head=8,
        n_head_kv=2,
        head_dim=128,
        n_embd=512,
        n_ctx_train=131072,
    )
