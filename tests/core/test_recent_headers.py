"""A header read again from an unchanged file is the one read before (no second walk of a
262,144-token vocabulary); any change to the file gives the new header, and a file written in
the last two seconds is always read again (a same-size rewrite can fall in one clock tick)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from app.models import recent_headers
from app.models.gguf_read import read_gguf_header
from tests.gguf_factory import write_tiny_gguf


def _seen_later(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """The files read from here on look `seconds` old to the cache, as a model downloaded
    earlier is (a test's file was just written)."""
    now = time.time()
    monkeypatch.setattr(recent_headers, "_now", lambda: now + seconds)


def test_an_unchanged_file_is_read_once_and_a_changed_one_again(tmp_path: Path, monkeypatch):
    path = tmp_path / "m.gguf"
    write_tiny_gguf(path, n_layer=2)
    _seen_later(monkeypatch, 60)
    first = read_gguf_header(path)
    assert read_gguf_header(path) is first  # kept: not read again
    write_tiny_gguf(path, n_layer=3, n_ctx_train=8192)
    again = read_gguf_header(path)
    assert again is not first and again.metadata["llama.block_count"] == 3


def test_a_file_written_in_the_last_two_seconds_is_read_again(tmp_path: Path, monkeypatch):
    path = tmp_path / "m.gguf"
    write_tiny_gguf(path, n_layer=2)
    _seen_later(monkeypatch, 1)
    first = read_gguf_header(path)
    assert read_gguf_header(path) is not first
    _seen_later(monkeypatch, 3)
    assert read_gguf_header(path) is not first  # now kept from here on
    assert read_gguf_header(path) is read_gguf_header(path)
