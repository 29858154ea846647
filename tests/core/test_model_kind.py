"""Base model or chat model, from a GGUF's template and names (app.models.model_kind)."""

from __future__ import annotations

from app.models.gguf_read import read_gguf_header
from app.models.model_kind import base_model_reason


def test_the_starter_model_is_a_base_model(starter_model_path) -> None:
    header = read_gguf_header(starter_model_path)
    assert "tokenizer.chat_template" not in header.metadata
    reason = base_model_reason(header.metadata, False, starter_model_path.name)
    assert reason.startswith("its file has no chat template")


def test_names_that_say_instruct_or_base() -> None:
    assert base_model_reason({"general.name": "Gemma 3 1b It"}, False) == ""
    assert base_model_reason({}, False, "Qwen2.5-0.5B-Instruct-Q4_K_M.gguf") == ""
    assert base_model_reason({"general.tags": ["chat"]}, False) == ""
    assert base_model_reason({"general.name": "Llama 3.2 1B"}, True) == ""
    assert base_model_reason({"general.finetune": "base"}, True) == (
        "its name says it is a base model"
    )
    # "it" only as a word: "split" or "kit" say nothing
    assert base_model_reason({"general.name": "kit-split"}, False) != ""
