"""Tool calls through the real server, the starter model and the openai client: a required
call parses and follows the function's parameters, whole and streamed; an agent loop sends
the result back and gets an answer; 'auto' reads a reply that is a call as a call; 'none'
leaves the tools out; a tool the server cannot serve is a 400 that names the problem."""

from __future__ import annotations

import json

import httpx2
import pytest
from openai import OpenAI

pytestmark = pytest.mark.slow

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city now.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string", "maxLength": 40}},
            "required": ["zone"],
        },
    },
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
SETTINGS = {"max_tokens": 48, "temperature": 0, "seed": 1}


def _client(base_url: str) -> OpenAI:
    return OpenAI(base_url=base_url, api_key="not-needed", max_retries=0, timeout=120)


def _assert_weather_arguments(arguments: str) -> None:
    parsed = json.loads(arguments)
    assert set(parsed) == {"city", "unit"} and isinstance(parsed["city"], str)
    assert parsed["unit"] in ("celsius", "fahrenheit")


def _streamed_call(chunks) -> tuple[str, str, str, str | None]:
    """id, name, arguments and finish_reason, put together from a stream's deltas as the
    openai SDK's users do."""
    call_id = name = arguments = ""
    reason = None
    for chunk in chunks:
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        for delta in choice.delta.tool_calls or []:
            assert delta.index == 0
            call_id += delta.id or ""
            name += (delta.function.name or "") if delta.function else ""
            arguments += (delta.function.arguments or "") if delta.function else ""
        reason = choice.finish_reason or reason
    return call_id, name, arguments, reason


def test_a_required_call_follows_the_parameters_whole_and_streamed(starter_server):
    client = _client(starter_server.base_url)
    whole = client.chat.completions.create(
        model="any", messages=ASK, tools=[WEATHER], tool_choice="required", **SETTINGS
    )
    choice = whole.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "get_weather"
    _assert_weather_arguments(call.function.arguments)

    chunks = client.chat.completions.create(
        model="any",
        messages=ASK,
        tools=[WEATHER],
        tool_choice="required",
        stream=True,
        **SETTINGS,
    )
    call_id, name, arguments, reason = _streamed_call(chunks)
    assert call_id.startswith("call_") and name == "get_weather" and reason == "tool_calls"
    _assert_weather_arguments(arguments)


def test_a_named_function_is_the_one_called(starter_server):
    client = _client(starter_server.base_url)
    reply = client.chat.completions.create(
        model="any",
        messages=ASK,
        tools=[WEATHER, TIME],
        tool_choice={"type": "function", "function": {"name": "get_time"}},
        **SETTINGS,
    )
    (call,) = reply.choices[0].message.tool_calls
    assert call.function.name == "get_time"
    assert isinstance(json.loads(call.function.arguments)["zone"], str)


@pytest.mark.parametrize("stream", [False, True])
def test_an_agent_loop_calls_a_function_and_answers_from_its_result(starter_server, stream):
    client = _client(starter_server.base_url)
    first = client.chat.completions.create(
        model="any", messages=ASK, tools=[WEATHER], tool_choice="required", **SETTINGS
    )
    call = first.choices[0].message.tool_calls[0]
    calling = first.choices[0].message.model_dump(exclude_none=True)

    def answer(result: str, **extra: object):
        messages = [*ASK, calling, {"role": "tool", "tool_call_id": call.id, "content": result}]
        return client.chat.completions.create(
            model="any", messages=messages, tools=[WEATHER], max_tokens=8, temperature=0, **extra
        )

    if stream:
        chunks = list(answer("Sunny, 21 degrees.", stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        reasons = [c.choices[0].finish_reason for c in chunks if c.choices]
        assert text.strip() and reasons[-1] in ("stop", "length")
        return
    reply = answer("Sunny, 21 degrees.")
    assert reply.choices[0].finish_reason in ("stop", "length")
    assert reply.choices[0].message.content and not reply.choices[0].message.tool_calls
    # the result reaches the model: a longer result is a longer prompt
    longer = answer("Sunny, 21 degrees, a light wind from the west and no rain until Friday.")
    assert longer.usage.prompt_tokens > reply.usage.prompt_tokens > first.usage.prompt_tokens


def test_auto_reads_a_reply_that_is_a_call_as_a_call(starter_server):
    # A response_format makes the model's own reply a call, so 'auto' has one to find.
    call_shape = {
        "type": "object",
        "properties": {
            "name": {"const": "get_weather"},
            "arguments": WEATHER["function"]["parameters"],
        },
        "required": ["name", "arguments"],
    }
    as_call = {"type": "json_schema", "json_schema": {"name": "call", "schema": call_shape}}
    client = _client(starter_server.base_url)
    settings = dict(tools=[WEATHER], tool_choice="auto", response_format=as_call, **SETTINGS)
    whole = client.chat.completions.create(model="any", messages=ASK, **settings)
    assert whole.choices[0].finish_reason == "tool_calls"
    _assert_weather_arguments(whole.choices[0].message.tool_calls[0].function.arguments)
    chunks = list(
        client.chat.completions.create(model="any", messages=ASK, stream=True, **settings)
    )
    assert not any(c.choices and c.choices[0].delta.content for c in chunks)
    _call_id, name, arguments, reason = _streamed_call(chunks)
    assert name == "get_weather" and reason == "tool_calls"
    _assert_weather_arguments(arguments)


def test_tool_choice_none_answers_in_words_without_the_tools_in_the_prompt(starter_server):
    client = _client(starter_server.base_url)
    short = {**SETTINGS, "max_tokens": 4}  # only the prompt is compared
    plain = client.chat.completions.create(model="any", messages=ASK, **short)
    none = client.chat.completions.create(
        model="any", messages=ASK, tools=[WEATHER], tool_choice="none", **short
    )
    offered = client.chat.completions.create(
        model="any", messages=ASK, tools=[WEATHER], tool_choice="required", **short
    )
    assert none.choices[0].message.tool_calls is None and none.choices[0].message.content
    assert none.usage.prompt_tokens == plain.usage.prompt_tokens
    assert offered.usage.prompt_tokens > plain.usage.prompt_tokens + 20  # the tools described


def _call_turn(arguments: str = '{"city": "Paris", "unit": "celsius"}') -> dict[str, object]:
    function = {"name": "get_weather", "arguments": arguments}
    call = {"id": "call_1", "type": "function", "function": function}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def _with_tools(**fields: object) -> dict[str, object]:
    return {"model": "any", "messages": ASK, "tools": [WEATHER], "max_tokens": 4, **fields}


NO_NAME = {"type": "function", "function": {"parameters": {"type": "object"}}}
ARRAY_PARAMETERS = {"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}
REMOTE_REF = {"$ref": "https://example.com/schema.json"}
REMOTE = {"type": "function", "function": {"name": "f", "parameters": REMOTE_REF}}
WORDY = [  # 300 KB of tools: over what the server turns into grammar for one request
    {"type": "function", "function": {"name": f"f{i}", "description": "x" * 3000}}
    for i in range(100)
]


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        (_with_tools(tools=[NO_NAME]), "tools[0].function.name", "function name"),
        (_with_tools(tools=[ARRAY_PARAMETERS]), "tools[0].function.parameters", "'object'"),
        (_with_tools(tools=[REMOTE]), "tools[0].function.parameters", "remote schema"),
        (_with_tools(tools=[WEATHER, WEATHER]), "tools[1].function.name", "repeats"),
        (_with_tools(tools=WORDY), "tools", "KiB of JSON"),
        (
            _with_tools(tool_choice={"type": "function", "function": {"name": "fly"}}),
            "tool_choice.function.name",
            "not in 'tools'",
        ),
        (_with_tools(tool_choice="sometimes"), "tool_choice", "must be"),
        ({"model": "any", "messages": ASK, "tool_choice": "required"}, "tool_choice", "needs"),
        (
            _with_tools(messages=[*ASK, _call_turn(), {"role": "tool", "content": "x"}]),
            "messages[2].tool_call_id",
            "must name",
        ),
        (
            _with_tools(
                messages=[*ASK, {"role": "tool", "tool_call_id": "call_9", "content": "x"}]
            ),
            "messages[1].tool_call_id",
            "no tool call",
        ),
        (
            _with_tools(messages=[*ASK, _call_turn("{not json")]),
            "messages[1].tool_calls[0].function.arguments",
            "JSON object",
        ),
        (
            _with_tools(logprobs=True, tool_choice="auto"),
            "logprobs",
            "cannot be combined",
        ),
        (
            _with_tools(tool_choice="required", response_format={"type": "json_object"}),
            "response_format",
            "cannot be combined",
        ),
    ],
)
def test_a_tool_the_server_cannot_serve_is_a_400_naming_the_problem(
    starter_server, body, param, words
):
    answer = httpx2.post(f"{starter_server.base_url}/chat/completions", json=body, timeout=60)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"] == param and words in error["message"], error
