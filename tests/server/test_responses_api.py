"""OpenAI's Responses API (POST /v1/responses), its text subset, through the real server, the
starter model and the real openai client: a string or message list in, instructions, the
token limit, the stream's events; what it does not serve is a 400 that names it."""

from __future__ import annotations

import httpx2
import openai
import pytest
from openai import OpenAI

pytestmark = pytest.mark.slow


def _client(base_url: str) -> OpenAI:
    return OpenAI(base_url=base_url, api_key="not-needed", max_retries=0, timeout=120)


def test_a_response_whole_and_streamed_with_instructions_and_a_token_limit(starter_server):
    client = _client(starter_server.base_url)
    settings = {"model": "any", "instructions": "Be brief.", "max_output_tokens": 8}
    whole = client.responses.create(input="Name a colour.", temperature=0, **settings)
    assert whole.object == "response" and whole.status == "incomplete"
    assert whole.incomplete_details.reason == "max_output_tokens"
    assert whole.output_text and whole.usage.output_tokens == 8
    assert whole.instructions == "Be brief."
    # the instructions reach the prompt
    bare = client.responses.create(
        model="any", input="Name a colour.", max_output_tokens=8, temperature=0
    )
    assert whole.usage.input_tokens > bare.usage.input_tokens

    events = list(
        client.responses.create(input="Name a colour.", temperature=0, stream=True, **settings)
    )
    kinds = [event.type for event in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.incomplete"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == whole.output_text
    assert events[-1].response.output_text == whole.output_text


def test_a_message_list_is_the_conversation(starter_server):
    client = _client(starter_server.base_url)
    turns = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "Hello!"}]},
        {"role": "user", "content": [{"type": "input_text", "text": "Name a colour."}]},
    ]
    reply = client.responses.create(model="any", input=turns, max_output_tokens=4)
    short = client.responses.create(model="any", input=turns[2:], max_output_tokens=4)
    assert reply.status == "incomplete" and reply.output_text
    assert reply.usage.input_tokens > short.usage.input_tokens  # the earlier turns count


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"previous_response_id": "resp_1"}, "previous_response_id"),
        ({"tools": [{"type": "web_search"}]}, "tools"),
        ({"store": True}, "store"),
        ({"text": {"format": {"type": "json_object"}}}, "text.format"),
        ({"input": [{"type": "function_call_output", "output": "x"}]}, "input[0].type"),
        ({"max_output_tokens": 0}, "max_output_tokens"),
    ],
)
def test_what_it_does_not_serve_is_a_400_naming_it(starter_server, fields, param):
    body = {"model": "any", "input": "Hi", **fields}
    refused = httpx2.post(f"{starter_server.base_url}/responses", json=body, timeout=60)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == param


def test_a_base_model_is_refused_a_response_unless_allowed(starter_server):
    with starter_server.another() as strict, pytest.raises(openai.BadRequestError) as refused:
        _client(strict.base_url).responses.create(model="any", input="Hi", max_output_tokens=2)
    assert refused.value.code == "model_not_chat"
