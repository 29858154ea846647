"""Anthropic's Messages API (POST /v1/messages) through the real server and the starter model,
with raw HTTP as Anthropic's clients send it: the whole message and the stream's events in
Anthropic's order, usage, stop sequences, max_tokens required, errors in Anthropic's shape,
the key in x-api-key, and the base-model rule of the chat route."""

from __future__ import annotations

import json

import httpx2
import pytest

pytestmark = pytest.mark.slow

HEADERS = {"anthropic-version": "2023-06-01"}
ASK = [{"role": "user", "content": "Name three colours."}]
STREAM_ORDER = ["message_start", "content_block_start"]
STREAM_END = ["content_block_stop", "message_delta", "message_stop"]


def _post(base_url: str, body: dict[str, object], **headers: str) -> httpx2.Response:
    return httpx2.post(
        f"{base_url}/messages", json=body, headers={**HEADERS, **headers}, timeout=120
    )


def _events(response: httpx2.Response) -> list[tuple[str, dict[str, object]]]:
    """The stream's (event name, data) pairs; each data's type is its event's name."""
    events = []
    for block in response.text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        data = json.loads(lines["data"])
        assert data["type"] == lines["event"]
        events.append((lines["event"], data))
    return events


def test_a_message_whole_and_streamed_in_anthropics_shapes(starter_server):
    body = {
        "model": "any",
        "max_tokens": 8,
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Name a colour."}]}],
        "temperature": 0,
    }
    whole = _post(starter_server.base_url, body)
    assert whole.status_code == 200, whole.text
    message = whole.json()
    assert message["type"] == "message" and message["role"] == "assistant"
    assert message["id"].startswith("msg_")
    assert message["stop_reason"] == "max_tokens" and message["stop_sequence"] is None
    (block,) = message["content"]
    assert block["type"] == "text" and block["text"]
    assert message["usage"]["output_tokens"] == 8 and message["usage"]["input_tokens"] > 5

    streamed = _post(starter_server.base_url, {**body, "stream": True})
    assert streamed.headers["content-type"].startswith("text/event-stream")
    events = _events(streamed)
    names = [name for name, _ in events]
    assert names[:2] == STREAM_ORDER and names[-3:] == STREAM_END
    assert set(names[2:-3]) == {"content_block_delta"}
    start = events[0][1]["message"]
    assert start["usage"] == {"input_tokens": message["usage"]["input_tokens"], "output_tokens": 0}
    deltas = [data["delta"] for name, data in events if name == "content_block_delta"]
    assert all(delta["type"] == "text_delta" for delta in deltas)
    assert "".join(delta["text"] for delta in deltas) == block["text"]
    ending = events[-2][1]
    assert ending["delta"] == {"stop_reason": "max_tokens", "stop_sequence": None}
    assert ending["usage"] == {"output_tokens": 8}


def test_a_stop_sequence_ends_the_message_and_is_named(starter_server):
    prompt = [{"role": "user", "content": "Monday, Tuesday, Wednesday,"}]
    body = {"model": "any", "max_tokens": 16, "messages": prompt, "temperature": 0}
    full = _post(starter_server.base_url, body).json()["content"][0]["text"]
    words = full.split()
    assert len(words) >= 2, full
    cut = _post(starter_server.base_url, {**body, "stop_sequences": [words[1]]}).json()
    assert cut["stop_reason"] == "stop_sequence" and cut["stop_sequence"] == words[1]
    assert words[1] not in cut["content"][0]["text"]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"model": "any", "messages": ASK}, "max_tokens"),
        ({"model": "any", "max_tokens": 4, "messages": ASK, "tools": []}, "'tools'"),
        ({"model": "any", "max_tokens": 4, "messages": ASK, "temperature": 1.5}, "between 0"),
        (
            {
                "model": "any",
                "max_tokens": 4,
                "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}],
            },
            "only 'text' blocks",
        ),
        (
            {"model": "any", "max_tokens": 4, "messages": [{"role": "system", "content": "x"}]},
            "role",
        ),
    ],
)
def test_a_request_that_cannot_be_served_is_an_anthropic_error(starter_server, body, words):
    refused = _post(starter_server.base_url, body)
    assert refused.status_code == 400
    error = refused.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert words in error["error"]["message"]


def test_the_key_goes_in_x_api_key_and_a_wrong_one_is_an_anthropic_error(starter_server):
    body = {"model": "any", "max_tokens": 2, "messages": ASK}
    with starter_server.another(api_key="s3cret", allow_chat_on_base_model=True) as keyed:
        wrong = _post(keyed.base_url, body, **{"x-api-key": "nope"})
        assert wrong.status_code == 401
        assert wrong.json()["error"]["type"] == "authentication_error"
        assert _post(keyed.base_url, body, **{"x-api-key": "s3cret"}).status_code == 200


def test_a_base_model_is_refused_a_message_unless_allowed(starter_server):
    body = {"model": "any", "max_tokens": 2, "messages": ASK}
    with starter_server.another() as strict:
        refused = _post(strict.base_url, body)
        assert refused.status_code == 400 and "/v1/completions" in refused.text
        assert refused.json()["error"]["type"] == "invalid_request_error"
