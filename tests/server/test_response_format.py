"""response_format through the real server, the starter model and the openai client: the reply
is JSON that the schema accepts, whole and streamed, on chat and completions; a format the
server cannot follow is a 400 that says why, and the server keeps answering."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from openai import OpenAI

pytestmark = pytest.mark.slow

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 24}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
AS_PERSON = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}
ASK = [{"role": "user", "content": "Describe a person."}]


def _client(base_url: str) -> OpenAI:
    return OpenAI(base_url=base_url, api_key="not-needed", max_retries=0, timeout=120)


def _post(url: str, body: object) -> tuple[int, dict[str, dict[str, str]]]:
    """A raw POST: the status and the JSON body, an error status included."""
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def _assert_person(text: str) -> None:
    person = json.loads(text)
    assert isinstance(person, dict) and set(person) == {"name", "age"}
    assert isinstance(person["name"], str) and len(person["name"]) <= 24
    assert isinstance(person["age"], int) and not isinstance(person["age"], bool)


@pytest.mark.parametrize("seed", [1, 2])
def test_a_chat_reply_follows_the_json_schema_whole_and_streamed(starter_server, seed):
    client = _client(starter_server.base_url)
    settings = {"max_tokens": 120, "temperature": 0.9, "seed": seed}
    whole = client.chat.completions.create(
        model="any", messages=ASK, response_format=AS_PERSON, **settings
    )
    assert whole.choices[0].finish_reason == "stop"
    _assert_person(whole.choices[0].message.content or "")
    chunks = client.chat.completions.create(
        model="any", messages=ASK, response_format=AS_PERSON, stream=True, **settings
    )
    _assert_person("".join(c.choices[0].delta.content or "" for c in chunks if c.choices))


def test_a_completion_follows_the_json_schema_whole_and_streamed(starter_server):
    client = _client(starter_server.base_url)
    settings = {"max_tokens": 120, "temperature": 0.9, "seed": 3}
    body = {"response_format": AS_PERSON}
    prompt = "Here is a person:"
    whole = client.completions.create(model="any", prompt=prompt, extra_body=body, **settings)
    _assert_person(whole.choices[0].text)
    chunks = client.completions.create(
        model="any", prompt=prompt, extra_body=body, stream=True, **settings
    )
    _assert_person("".join(c.choices[0].text for c in chunks if c.choices))


def test_json_object_makes_the_reply_a_json_object(starter_server):
    client = _client(starter_server.base_url)
    reply = client.chat.completions.create(
        model="any",
        messages=[{"role": "user", "content": "Say hello as JSON."}],
        response_format={"type": "json_object"},
        max_tokens=40,
        temperature=0,
    )
    text = (reply.choices[0].message.content or "").lstrip()
    assert text.startswith("{")
    if reply.choices[0].finish_reason == "stop":  # within max_tokens: the whole object
        assert isinstance(json.loads(text), dict)


@pytest.mark.parametrize(
    ("response_format", "words"),
    [
        ({"type": "xml"}, "'response_format.type' must be"),
        ({"type": "json_schema"}, "'response_format.json_schema' must be an object"),
        (
            {"type": "json_schema", "json_schema": {"schema": {"$ref": "https://example.com/s"}}},
            "cannot be followed: it refers to a remote schema by URL",
        ),
        ("json", "'response_format' must be an object"),
        (
            {"type": "json_schema", "json_schema": {"schema": {"type": "integr"}}},
            "cannot be followed: Unrecognized schema",
        ),
    ],
)
def test_a_format_that_cannot_be_followed_is_a_400_naming_it(
    starter_server, response_format, words
):
    for path in ("/chat/completions", "/completions"):
        body = {"model": "any", "max_tokens": 4, "response_format": response_format}
        body |= {"messages": ASK} if path.startswith("/chat") else {"prompt": "Hi"}
        status, answer = _post(starter_server.base_url + path, body)
        assert status == 400
        error = answer["error"]
        assert words in error["message"] and error["param"] == "response_format"
        assert error["type"] == "invalid_request_error"
    after = _client(starter_server.base_url).completions.create(
        model="any", prompt="Hi", max_tokens=2
    )
    assert after.usage is not None and after.usage.completion_tokens >= 1
