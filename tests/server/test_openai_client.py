"""The real `openai` client against the real server on the starter model: what an editor or a
script calling KV Studio would see."""

from __future__ import annotations

import pytest
from openai import OpenAI

pytestmark = pytest.mark.slow

ASK = [{"role": "user", "content": "Name three colours."}]


def _client(base_url: str) -> OpenAI:
    return OpenAI(base_url=base_url, api_key="not-needed", max_retries=0, timeout=120)


def test_models_names_the_loaded_model_with_its_kv_cache(starter_server):
    models = _client(starter_server.base_url).models.list().data
    assert [m.id for m in models] == ["gemma-3-270m-q4_k_m"]
    extra = models[0].model_extra or {}
    assert extra["kv_mode"] == "q8_0/f16"
    assert extra["kv_bytes"] == sum(c.total_bytes for c in starter_server.loaded.kv_caches) > 0


def test_chat_reply_streamed_is_the_reply_given_whole_with_usage(starter_server):
    client = _client(starter_server.base_url)
    whole = client.chat.completions.create(
        model="any", messages=ASK, max_tokens=12, temperature=0, seed=1
    )
    chunks = list(
        client.chat.completions.create(
            model="any",
            messages=ASK,
            max_tokens=12,
            temperature=0,
            seed=1,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = whole.choices[0].message.content
    assert text and whole.choices[0].message.role == "assistant"
    assert whole.usage.completion_tokens == 12 and whole.choices[0].finish_reason == "length"
    assert whole.usage.total_tokens == whole.usage.prompt_tokens + 12
    # the model's own chat template: the prompt is the turn markers plus the question
    assert whole.usage.prompt_tokens > 5
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage


def test_completion_streamed_is_the_completion_given_whole(starter_server):
    client = _client(starter_server.base_url)
    prompt = "The three primary colours are"
    whole = client.completions.create(model="any", prompt=prompt, max_tokens=10, temperature=0)
    streamed = client.completions.create(
        model="any", prompt=prompt, max_tokens=10, temperature=0, stream=True
    )
    assert whole.object == "text_completion" and whole.usage.completion_tokens == 10
    assert "".join(c.choices[0].text for c in streamed) == whole.choices[0].text != ""


def test_a_stop_string_ends_the_reply_before_it(starter_server):
    client = _client(starter_server.base_url)
    prompt = "Monday, Tuesday, Wednesday,"
    full = client.completions.create(model="any", prompt=prompt, max_tokens=16, temperature=0)
    words = full.choices[0].text.split()
    assert len(words) >= 3, full.choices[0].text
    stop = words[2]
    cut = client.completions.create(
        model="any", prompt=prompt, max_tokens=16, temperature=0, stop=[stop, "zzz-never"]
    )
    assert cut.choices[0].finish_reason == "stop"
    assert stop not in cut.choices[0].text
    assert full.choices[0].text.startswith(cut.choices[0].text)
    assert cut.usage.completion_tokens < full.usage.completion_tokens
