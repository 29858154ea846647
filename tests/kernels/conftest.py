"""Fixtures the kernel tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.models.random_model import write_model


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer Llama-shaped model with random weights (heads of 128, as Llama-3-8B's): the decode
    graph of a Llama, in seconds on the CPU."""
    return write_model(tmp_path_factory.mktemp("llama") / "tiny.gguf", 2, "small", None, 0)
