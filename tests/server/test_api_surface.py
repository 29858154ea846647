"""The API's surface as llama-server and OpenAI's clients expect it, on the real starter model
(a base model) in a small context: /health, GET /v1/models/{id}, the routes without /v1, the
X-Api-Key header, and the requests refused in one sentence (a field not served, a prompt
longer than the context, a chat with a base model); the turns dropped to fit are said."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx2
import openai
import pytest
from openai import OpenAI

from tests.server.served import Served, serve
from tests.waits import HANG_GUARD_S

pytestmark = pytest.mark.slow

N_CTX = 256
MODEL_ID = "gemma-3-270m-q4_k_m"
HELLO = [{"role": "user", "content": "Say hello."}]
TOO_LONG = "word " * 600  # about 600 tokens, over the 256-token context


@pytest.fixture(scope="module")
def base_server(starter_model_path: Path) -> Iterator[Served]:
    """The starter as `kvstudio serve` serves it by default: chat refused (a base model)."""
    with serve(starter_model_path, n_ctx=N_CTX) as served:
        yield served


@pytest.fixture(scope="module")
def chat_server(base_server: Served) -> Iterator[Served]:
    """The same engine, served with --allow-chat-on-base-model."""
    with base_server.another(allow_chat_on_base_model=True) as served:
        yield served


def _client(base_url: str, key: str = "none") -> OpenAI:
    return OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=HANG_GUARD_S)


def _root(served: Served) -> str:
    return served.base_url.removesuffix("/v1")


def _error(response: httpx2.Response) -> dict[str, object]:
    body = response.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    return dict(body["error"])


# ---- /health, /v1/models/{id}, the routes without /v1, X-Api-Key -----------------------------


def test_health_is_ok_while_the_model_is_loaded_with_or_without_v1(base_server):
    for path in ("/health", "/v1/health"):
        response = httpx2.get(_root(base_server) + path, timeout=HANG_GUARD_S)
        assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_health_is_503_after_the_engine_died_and_the_next_request_loads_it_again(base_server):
    assert base_server.engine is not None
    base_server.engine.kill()
    response = httpx2.get(_root(base_server) + "/health", timeout=HANG_GUARD_S)
    assert response.status_code == 503
    assert _error(response)["message"] == (
        "The engine stopped; the next request loads the model again."
    )
    # The next request is answered (the model loaded again first), not failed.
    reply = _client(base_server.base_url).completions.create(
        model="any", prompt="One, two,", max_tokens=3, temperature=0
    )
    assert reply.usage.completion_tokens >= 1
    response = httpx2.get(_root(base_server) + "/health", timeout=HANG_GUARD_S)
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_a_model_is_retrieved_by_its_id_and_an_unknown_id_is_404(base_server):
    client = _client(base_server.base_url)
    model = client.models.retrieve(MODEL_ID)
    assert model.id == MODEL_ID and model.object == "model"
    assert (model.model_extra or {})["context_length"] == N_CTX
    with pytest.raises(openai.NotFoundError) as unknown:
        client.models.retrieve("no-such-model")
    assert unknown.value.body["code"] == "model_not_found"  # type: ignore[index]
    assert unknown.value.body["param"] == "model"  # type: ignore[index]


def test_every_route_is_also_served_without_v1(chat_server):
    root = _root(chat_server)
    client = _client(root)  # the SDK then posts to /completions, /chat/completions, /models
    assert [m.id for m in client.models.list().data] == [MODEL_ID]
    assert client.models.retrieve(MODEL_ID).id == MODEL_ID
    text = client.completions.create(model="any", prompt="One, two,", max_tokens=3)
    assert text.object == "text_completion" and text.choices[0].text
    chat = client.chat.completions.create(model="any", messages=HELLO, max_tokens=3)
    assert chat.object == "chat.completion" and chat.choices[0].message.content
    paths = [r.path for r in chat_server.records.all]
    assert {"/completions", "/chat/completions"} <= set(paths)


def test_the_key_is_taken_from_x_api_key_too_and_health_needs_none(base_server):
    with base_server.another(api_key="s3cret-key") as keyed:
        url = keyed.base_url + "/models"
        assert httpx2.get(url, headers={"X-Api-Key": "s3cret-key"}).status_code == 200
        wrong = httpx2.get(url, headers={"X-Api-Key": "wrong"})
        assert wrong.status_code == 401 and _error(wrong)["code"] == "invalid_api_key"
        missing = httpx2.get(url)
        assert missing.status_code == 401 and "X-Api-Key" in str(_error(missing)["message"])
        assert httpx2.get(_root(keyed) + "/health").json() == {"status": "ok"}
        reply = _client(keyed.base_url, "s3cret-key").models.list()  # Authorization: Bearer
        assert [m.id for m in reply.data] == [MODEL_ID]


# ---- fields the server does not serve ----------------------------------------------------------


def test_unknown_fields_anywhere_in_the_request_are_refused_by_name(chat_server):
    url = chat_server.base_url
    cases = [
        ("/chat/completions", {"messages": HELLO, "mirostat": 2}, "mirostat"),
        ("/chat/completions", {"messages": [{**HELLO[0], "name": "bob"}]}, "messages[0].name"),
        (
            "/chat/completions",
            {"messages": HELLO, "stream": True, "stream_options": {"include_obfuscation": 1}},
            "stream_options.include_obfuscation",
        ),
        ("/completions", {"prompt": "x", "echo": True}, "echo"),
        ("/completions", {"prompt": "x", "max_completion_tokens": 3}, "max_completion_tokens"),
        ("/completions", {"prompt": "x", "suffix": "y", "cache_prompt": True}, "suffix"),
    ]
    for path, fields, param in cases:
        response = httpx2.post(url + path, json={"model": "any", **fields}, timeout=HANG_GUARD_S)
        assert response.status_code == 400, (path, fields)
        assert _error(response)["param"] == param, response.text
    response = httpx2.post(
        url + "/completions", json={"model": "any", "prompt": "x", "a": 1, "b": 2}
    )
    assert "'a', 'b' are not supported" in str(_error(response)["message"])


def test_every_listed_field_is_served_and_neutral_values_of_others_are_accepted(chat_server):
    client = _client(chat_server.base_url)
    reply = client.chat.completions.create(
        model="any",
        messages=[{"role": "system", "content": "Be brief."}, *HELLO],
        max_completion_tokens=3,
        temperature=0.5,
        top_p=0.9,
        stop=["zzz"],
        seed=3,
        n=1,
        user="me",
        stream=False,
        # what LangChain and others send with every request: asks for nothing
        presence_penalty=0,
        frequency_penalty=0,
        logprobs=False,
        extra_body={"top_k": 20, "min_p": 0.05, "repeat_penalty": 1.1},
    )
    assert reply.choices[0].message.content
    chunks = client.completions.create(
        model="any",
        prompt="One, two,",
        max_tokens=3,
        stream=True,
        stream_options={"include_usage": True},
        echo=False,
        best_of=1,
    )
    assert list(chunks)[-1].usage.completion_tokens >= 1  # type: ignore[union-attr]


# ---- a prompt longer than the context ----------------------------------------------------------


def _assert_too_long(error: openai.BadRequestError) -> None:
    assert error.status_code == 400
    assert error.body["code"] == "context_length_exceeded"  # type: ignore[index]
    found = re.search(
        r"The prompt is (\d+) tokens, which does not fit the 256-token", error.message
    )
    assert found and int(found.group(1)) > N_CTX, error.message


def test_a_prompt_longer_than_the_context_is_a_400_also_when_streamed(chat_server):
    client = _client(chat_server.base_url)
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as text:
            client.completions.create(model="any", prompt=TOO_LONG, max_tokens=3, stream=stream)
        _assert_too_long(text.value)
        assert text.value.body["param"] == "prompt"  # type: ignore[index]
        with pytest.raises(openai.BadRequestError) as chat:
            client.chat.completions.create(
                model="any",
                messages=[{"role": "user", "content": TOO_LONG}],
                max_tokens=3,
                stream=stream,
            )
        _assert_too_long(chat.value)
    # the status line of a stream is the 400, with a JSON body, not an event after a 200
    with httpx2.stream(
        "POST",
        chat_server.base_url + "/completions",
        json={"model": "any", "prompt": TOO_LONG, "stream": True},
        timeout=HANG_GUARD_S,
    ) as response:
        response.read()
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/json"
    assert _error(response)["code"] == "context_length_exceeded"
    record = chat_server.records.wait_for(lambda r: r.status == 400 and "256-token" in r.error)
    assert record.completion_tokens == 0
    # and the server answers the next client
    assert client.completions.create(model="any", prompt="One,", max_tokens=2).choices


# ---- turns dropped to fit ----------------------------------------------------------------------


def _long_conversation() -> list[dict[str, str]]:
    turns: list[dict[str, str]] = []
    for i in range(6):
        turns.append({"role": "user", "content": f"Tell me about the number {i}. " * 8})
        turns.append({"role": "assistant", "content": f"The number {i} is a number. " * 8})
    return [*turns, {"role": "user", "content": "Say hello."}]


def test_turns_dropped_to_fit_are_said_in_a_field_and_a_header_streamed_or_not(chat_server):
    client = _client(chat_server.base_url)
    conversation = _long_conversation()
    raw = client.chat.completions.with_raw_response.create(
        model="any", messages=conversation, max_tokens=4, temperature=0
    )
    whole = raw.parse()
    dropped = (whole.model_extra or {})["kvstudio"]["dropped_messages"]
    assert 0 < dropped < len(conversation) - 1
    assert raw.headers["X-KVStudio-Dropped-Messages"] == str(dropped)
    # The count is right: the conversation without those turns fits as it is, dropping none.
    kept = client.chat.completions.with_raw_response.create(
        model="any", messages=conversation[dropped:], max_tokens=4, temperature=0
    )
    assert "X-KVStudio-Dropped-Messages" not in kept.headers
    assert "kvstudio" not in (kept.parse().model_extra or {})
    assert kept.parse().usage.prompt_tokens == whole.usage.prompt_tokens  # type: ignore[union-attr]

    with client.chat.completions.with_streaming_response.create(
        model="any", messages=conversation, max_tokens=4, temperature=0, stream=True
    ) as streamed:
        assert streamed.headers["X-KVStudio-Dropped-Messages"] == str(dropped)
        chunks = list(streamed.parse())
    assert (chunks[0].model_extra or {})["kvstudio"] == {"dropped_messages": dropped}
    assert all("kvstudio" not in (c.model_extra or {}) for c in chunks[1:])


# ---- a chat with a base model ------------------------------------------------------------------


def test_a_chat_with_a_base_model_is_refused_with_a_pointer_to_completions(base_server):
    client = _client(base_server.base_url)
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(model="any", messages=HELLO, max_tokens=3, stream=stream)
        assert refused.value.body["code"] == "model_not_chat"  # type: ignore[index]
        message = refused.value.message
        assert f"{MODEL_ID} is a base model" in message and "/v1/completions" in message
        assert "--allow-chat-on-base-model" in message
    reply = client.completions.create(model="any", prompt="One, two,", max_tokens=3)
    assert reply.choices[0].text


def test_serve_help_names_the_option_that_allows_chat_on_a_base_model():
    from tests.cli_runner import kvstudio

    result = kvstudio("serve", "--help")
    assert "--allow-chat-on-base-model" in result.stdout
