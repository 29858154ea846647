"""The server tests' engines: the starter model where the text matters, a tiny random-weight
GGUF (fast, nonsense text) where only the flow does. One engine per module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.served import Served, serve


@pytest.fixture(scope="session")
def random_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from app.models.random_model import write_model

    return write_model(tmp_path_factory.mktemp("server") / "tiny.gguf", 2, "small", None)


@pytest.fixture(scope="module")
def starter_server(starter_model_path: Path) -> Iterator[Served]:
    # The starter is a base model; these tests chat with it to test the server, not the model.
    with serve(starter_model_path, n_ctx=2048, allow_chat_on_base_model=True) as served:
        yield served


@pytest.fixture(scope="module")
def tiny_server(random_gguf: Path) -> Iterator[Served]:
    # A random model has no chat template: a base model, chatted with to test the flow.
    with serve(random_gguf, max_body_bytes=64 * 1024, allow_chat_on_base_model=True) as served:
        yield served
