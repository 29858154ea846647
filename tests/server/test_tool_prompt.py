"""How tools reach a chat template, and how a reply is read as calls, without a model: a
template that knows tools gets them in Hugging Face's shape; any other gets them in words;
a reply is a call only when it is nothing but calls to offered functions, and a streamed
reply is held back only while it could still be one."""

from __future__ import annotations

import json

from app.engine.chat_template import choose_template
from app.engine.messages import ChatMessage
from app.engine.tool_messages import ToolCall, ToolSpec
from app.engine.tool_prompt import tools_in_words
from app.server.tool_calls import CallWatcher, read_calls
from app.server.tool_request import ToolUse

# The shape of Hermes / Qwen templates: tools as JSON in the system turn, calls in tags.
HERMES = (
    "{% if tools %}<|im_start|>system\n<tools>{% for t in tools %}{{ t | tojson }}{% endfor %}"
    "</tools><|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    "{% for c in m.tool_calls or [] %}<tool_call>{{ c.function.name }} "
    "{{ c.function.arguments | tojson }} {{ c.id }}</tool_call>{% endfor %}"
    "{% if m.tool_call_id %}[{{ m.tool_call_id }}]{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
WEATHER = ToolSpec("get_weather", "The weather now.", '{"type": "object"}')
CALL = ToolCall("call_1", "get_weather", '{"city": "Paris"}')
LOOP = (
    ChatMessage("system", "Be brief."),
    ChatMessage("user", "Weather in Paris?"),
    ChatMessage("assistant", "", tool_calls=(CALL,)),
    ChatMessage("tool", "Sunny.", tool_call_id="call_1"),
)


def test_a_template_that_knows_tools_gets_them_with_the_calls_and_results():
    template = choose_template(HERMES, "qwen2")
    assert template.source == "gguf" and template.knows_tools
    text = template.render(LOOP, tools=[WEATHER])
    tools = text.split("<tools>")[1].split("</tools>")[0]
    assert json.loads(tools)["function"]["name"] == "get_weather"
    assert '<tool_call>get_weather {"city": "Paris"} call_1</tool_call>' in text
    assert "<|im_start|>tool\nSunny.[call_1]<|im_end|>" in text


def test_a_template_without_tools_gets_them_in_words_after_the_system_messages():
    assert not choose_template(None, "gemma3").knows_tools
    plain = tools_in_words(LOOP, [WEATHER])
    assert [m.role for m in plain] == ["system", "system", "user", "assistant", "user"]
    assert "get_weather: The weather now." in plain[1].content
    assert json.loads(plain[3].content) == {"name": "get_weather", "arguments": {"city": "Paris"}}
    assert plain[4].content == "Result of get_weather: Sunny."
    assert not any(m.tool_calls or m.tool_call_id for m in plain)


def test_a_reply_is_read_as_calls_only_when_it_is_nothing_but_calls():
    names = ("get_weather",)
    hermes = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    (call,) = read_calls(hermes, names)
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Oslo"}
    llama = '{"name": "get_weather", "parameters": {"city": "Rome"}}'
    assert json.loads(read_calls(llama, names)[0].arguments) == {"city": "Rome"}
    two = '[{"name": "get_weather", "arguments": {}}, {"name": "get_weather", "arguments": {}}]'
    assert len(read_calls(two, names)) == 2
    assert read_calls('{"name": "fly", "arguments": {}}', names) == ()
    assert read_calls('{"name": "get_weather", "arguments": {}} and then', names) == ()
    assert read_calls('{"name": "get_weather", "arguments": [1]}', names) == ()
    assert read_calls("It is sunny.", names) == ()


def test_a_streamed_reply_in_words_is_sent_as_soon_as_it_cannot_be_a_call():
    watcher = CallWatcher(ToolUse((WEATHER,), ("get_weather",), False, ""))
    assert watcher.push("  ") == ""  # could still be a call
    assert watcher.push("It is") == "  It is"
    assert watcher.push(" sunny.") == " sunny."
    assert watcher.finish() == ("", ())
    watcher = CallWatcher(ToolUse((WEATHER,), ("get_weather",), False, ""))
    assert watcher.push('{"name": "get_weather", ') == ""
    assert watcher.push('"arguments": {}}') == ""
    held, calls = watcher.finish()
    assert held == "" and calls[0].name == "get_weather"
