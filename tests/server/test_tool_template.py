"""Tools through a model whose own chat template reads `tools`, served for real (a tiny
random-weight GGUF carrying such a template): the template gets the tools, not the server's
own description in words; a required call still follows the schema; a tool result reaches
the prompt through the template."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from openai import OpenAI

from tests.gguf_factory import write_tiny_gguf
from tests.server.served import Served, serve

pytestmark = pytest.mark.slow

# Like Hermes / Qwen templates, but it writes only each tool's name: what the server would add
# in words (the description, the schema) cannot reach the prompt through it.
NAMES_ONLY = (
    "{% if tools %}<|im_start|>system\nTools:{% for t in tools %} {{ t.function.name }}"
    "{% endfor %}<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    "{% for c in m.tool_calls or [] %}<tool_call>{{ c.function.name }} "
    "{{ c.function.arguments | tojson }}</tool_call>{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
ASK = [{"role": "user", "content": "Which way?"}]


def _tool(description: str) -> dict[str, object]:
    parameters = {
        "type": "object",
        "properties": {"way": {"enum": ["left", "right"]}},
        "required": ["way"],
    }
    function = {"name": "turn", "description": description, "parameters": parameters}
    return {"type": "function", "function": function}


@pytest.fixture(scope="module")
def template_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    model = write_tiny_gguf(
        Path(tmp_path_factory.mktemp("tools")) / "tools.gguf", chat_template=NAMES_ONLY
    )
    with serve(model, n_ctx=1024, allow_chat_on_base_model=True) as served:
        yield served


def test_a_template_that_reads_tools_gets_them_and_a_required_call_follows_the_schema(
    template_server,
):
    client = OpenAI(base_url=template_server.base_url, api_key="x", max_retries=0, timeout=120)
    settings = {"model": "any", "max_tokens": 120, "temperature": 0, "tool_choice": "required"}
    short = client.chat.completions.create(messages=ASK, tools=[_tool("Turn.")], **settings)
    long = client.chat.completions.create(
        messages=ASK, tools=[_tool("Turn the car at the next crossing. " * 8)], **settings
    )
    # the template writes names only: a longer description changes nothing in the prompt
    assert long.usage.prompt_tokens == short.usage.prompt_tokens
    (call,) = short.choices[0].message.tool_calls
    assert call.function.name == "turn" and short.choices[0].finish_reason == "tool_calls"
    assert json.loads(call.function.arguments)["way"] in ("left", "right")

    def answer(result: str) -> int:
        calling = short.choices[0].message.model_dump(exclude_none=True)
        messages = [*ASK, calling, {"role": "tool", "tool_call_id": call.id, "content": result}]
        reply = client.chat.completions.create(
            model="any", messages=messages, tools=[_tool("Turn.")], max_tokens=2
        )
        return reply.usage.prompt_tokens

    assert answer("left, then straight on for a mile") > answer("left") > short.usage.prompt_tokens
