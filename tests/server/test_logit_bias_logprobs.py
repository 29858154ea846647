"""logit_bias and logprobs through the real server, the starter model and the openai client:
a -100 bias bans a token, +100 forces it; logprobs are the log-softmax of the model's logits
(checked against llama.cpp's logits read in this process), in OpenAI's chat shape and the
legacy completions shape, whole and streamed."""

from __future__ import annotations

import math
from collections.abc import Iterator

import llama_cpp
import numpy as np
import openai
import pytest
from openai import OpenAI

from app.load.profile import LoadProfile
from tests.engine_threads import ENGINE_THREADS

pytestmark = pytest.mark.slow

PROMPT = "The capital of France is"
NO_PENALTY: dict[str, object] = {"repeat_penalty": 1.0}  # greedy picks the top logprob
GREEDY: dict[str, object] = {"temperature": 0, "extra_body": NO_PENALTY}


def _client(base_url: str) -> OpenAI:
    return OpenAI(base_url=base_url, api_key="not-needed", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def model(starter_model_path) -> Iterator[llama_cpp.Llama]:
    """The starter model loaded by the engine's own loader in this process, to read its
    logits directly."""
    from app.engine.llama_log import install
    from app.engine.loader import load_model

    options = LoadProfile(
        model_path=str(starter_model_path), n_ctx=256, n_threads=ENGINE_THREADS, n_gpu_layers=0
    )
    loaded = load_model(options, install())
    yield loaded.llm
    loaded.llm.close()


def _token_id(model: llama_cpp.Llama, text: str) -> int:
    (token,) = model.tokenize(text.encode(), add_bos=False, special=False)
    return int(token)


def _tokens(client: OpenAI, max_tokens: int, **extra: object) -> list[str]:
    body = {**NO_PENALTY, **extra}
    reply = client.completions.create(
        model="any",
        prompt=PROMPT,
        max_tokens=max_tokens,
        temperature=0,
        logprobs=0,
        extra_body=body,
    )
    logprobs = reply.choices[0].logprobs
    assert logprobs is not None and logprobs.tokens is not None
    return logprobs.tokens


def test_a_banned_token_never_appears_and_a_forced_one_does(starter_server, model):
    client = _client(starter_server.base_url)
    first = _tokens(client, 1)[0]
    banned = _tokens(client, 16, logit_bias={str(_token_id(model, first)): -100})
    assert first not in banned
    forced = _tokens(client, 3, logit_bias={str(_token_id(model, " banana")): 100})
    assert forced == [" banana"] * 3


def test_completion_logprobs_are_the_log_softmax_of_the_logits(starter_server, model):
    client = _client(starter_server.base_url)
    reply = client.completions.create(
        model="any", prompt=PROMPT, max_tokens=4, logprobs=5, **GREEDY
    )
    logprobs = reply.choices[0].logprobs
    assert logprobs is not None and logprobs.top_logprobs and logprobs.token_logprobs
    # The first token's step, read from llama.cpp in this process: the prompt's last logits.
    prompt = model.tokenize(PROMPT.encode(), add_bos=True, special=False)
    model.reset()
    model.eval(prompt)
    last = llama_cpp.llama_get_logits_ith(model._ctx.ctx, -1)
    logits = np.ctypeslib.as_array(last, shape=(model.n_vocab(),)).astype(np.float64)
    expected = logits - (logits.max() + np.log(np.exp(logits - logits.max()).sum()))
    top = np.argsort(-expected)[:5]
    served = logprobs.top_logprobs[0]
    assert list(served) == [model.detokenize([int(t)]).decode() for t in top]
    assert list(served.values()) == pytest.approx(expected[top].tolist(), abs=0.05)
    for chosen, alternatives, logprob in zip(
        logprobs.tokens or [], logprobs.top_logprobs, logprobs.token_logprobs, strict=True
    ):
        assert len(alternatives) == 5 and logprob <= 0
        assert list(alternatives.values()) == sorted(alternatives.values(), reverse=True)
        assert next(iter(alternatives)) == chosen and alternatives[chosen] == logprob
    assert logprobs.text_offset == [
        sum(len(t) for t in (logprobs.tokens or [])[:i]) for i in range(len(logprobs.tokens or []))
    ]
    assert "".join(logprobs.tokens or []) == reply.choices[0].text


def test_chat_logprobs_list_each_token_with_its_top_alternatives(starter_server):
    client = _client(starter_server.base_url)
    ask = [{"role": "user", "content": "Name a colour."}]
    whole = client.chat.completions.create(
        model="any", messages=ask, max_tokens=6, logprobs=True, top_logprobs=3, **GREEDY
    )
    content = whole.choices[0].logprobs.content if whole.choices[0].logprobs else None
    assert content and len(content) == whole.usage.completion_tokens
    for entry in content:
        top = entry.top_logprobs
        assert len(top) == 3 and entry.logprob <= 0
        assert [t.logprob for t in top] == sorted((t.logprob for t in top), reverse=True)
        assert (top[0].token, top[0].logprob) == (entry.token, entry.logprob)  # greedy
        assert sum(math.exp(t.logprob) for t in top) <= 1 + 1e-6
        assert bytes(entry.bytes or []).decode("utf-8", "replace") == entry.token
    streamed = list(
        client.chat.completions.create(
            model="any",
            messages=ask,
            max_tokens=6,
            logprobs=True,
            top_logprobs=3,
            stream=True,
            stream_options={"include_usage": True},
            **GREEDY,
        )
    )
    pieces = [
        (chunk.choices[0].delta.content or "", chunk.choices[0].logprobs.content or [])
        for chunk in streamed
        if chunk.choices and chunk.choices[0].logprobs
    ]
    # Each chunk carries the tokens of its own text, each token once.
    assert all(text == "".join(e.token for e in entries) for text, entries in pieces)
    entries = [entry for _text, chunk_entries in pieces for entry in chunk_entries]
    usage = streamed[-1].usage
    assert usage is not None and len(entries) == usage.completion_tokens
    assert all(len(e.top_logprobs) == 3 and e.logprob <= 0 for e in entries)


def test_without_logprobs_the_reply_has_none(starter_server):
    reply = _client(starter_server.base_url).chat.completions.create(
        model="any", messages=[{"role": "user", "content": "Hi"}], max_tokens=2
    )
    assert reply.choices[0].logprobs is None


@pytest.mark.parametrize("stream", [False, True])
def test_a_bias_on_a_token_the_model_does_not_have_is_a_400(starter_server, model, stream):
    client = _client(starter_server.base_url)
    missing = model.n_vocab()
    with pytest.raises(openai.BadRequestError) as refused:
        client.completions.create(
            model="any",
            prompt=PROMPT,
            max_tokens=2,
            stream=stream,
            logit_bias={str(missing): 5},
        )
    error = refused.value.body
    assert isinstance(error, dict) and error["param"] == "logit_bias"
    assert f"token {missing}, which this model does not have" in error["message"]
    assert _tokens(client, 1)  # and the server goes on answering
