"""The llama.cpp log router: fragments become lines, lines reach logging."""

from __future__ import annotations

import logging

from app.engine.llama_log import LlamaLogRouter


def test_fragments_are_joined_into_lines(caplog):
    router = LlamaLogRouter()
    with caplog.at_level(logging.DEBUG, logger="llama_cpp"):
        router.feed(3, "llama_kv_cache: size = ")
        router.feed(5, "  91.88 MiB (  8192 cells")
        router.feed(5, ")\nnext line start")
        assert router.take_lines() == ["llama_kv_cache: size =   91.88 MiB (  8192 cells)"]
        router.feed(2, " and its end\n")
    assert router.take_lines() == ["next line start and its end"]
    assert router.take_lines() == []
    levels = [r.levelno for r in caplog.records if r.name == "llama_cpp"]
    assert levels == [logging.WARNING, logging.INFO]


def test_flush_keeps_a_line_without_newline():
    router = LlamaLogRouter()
    router.feed(1, "no newline yet")
    assert router.take_lines() == []
    router.flush()
    assert router.take_lines() == ["no newline yet"]


def test_install_routes_real_llama_cpp_log():
    import llama_cpp

    router = LlamaLogRouter()
    router.install()
    try:
        # Loading a vocab-less path fails inside llama.cpp, which logs why.
        params = llama_cpp.llama_model_default_params()
        model = llama_cpp.llama_model_load_from_file(b"/nonexistent/model.gguf", params)
        assert not model
        router.flush()
        assert any("nonexistent" in line or "failed" in line for line in router.take_lines())
    finally:
        from app.engine.llama_log import ROUTER

        ROUTER.install()
