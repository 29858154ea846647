"""Chat templates: the GGUF's own in a sandbox, or one chosen by architecture."""

from __future__ import annotations

import pytest

from app.engine.chat_template import ChatTemplateError, choose_template
from app.engine.messages import ChatMessage
from app.platform.errors import BadInputError

CONVERSATION = (
    ChatMessage("system", "Be brief."),
    ChatMessage("user", "Hi"),
    ChatMessage("assistant", "Hello!"),
    ChatMessage("user", "Name a colour."),
)


def test_gemma_fallback_folds_system_into_first_user_turn():
    template = choose_template(None, "gemma3")
    assert template.source == "gemma"
    assert "<end_of_turn>" in template.stop
    text = template.render(CONVERSATION, bos_token="<bos>")
    assert text == (
        "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
        "<start_of_turn>model\nHello!<end_of_turn>\n"
        "<start_of_turn>user\nName a colour.<end_of_turn>\n"
        "<start_of_turn>model\n"
    )


def test_llama_picks_llama3_only_when_the_vocab_has_its_tokens():
    assert choose_template(None, "llama", lambda t: t == "<|eot_id|>").source == "llama-3"
    assert choose_template(None, "llama", lambda t: False).source == "chatml"
    assert choose_template(None, "qwen2").source == "chatml"
    text = choose_template(None, "qwen2").render(CONVERSATION[1:2])
    assert text == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def test_gguf_template_wins_and_its_end_marker_is_a_stop():
    gguf = (
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    template = choose_template(gguf, "gemma3")
    assert template.source == "gguf"
    assert template.stop == ("<|im_end|>",)
    assert template.render(CONVERSATION[1:2]).endswith("<|im_start|>assistant\n")


def test_override_and_unknown_override():
    assert choose_template("{{ x }}", "llama", override="gemma").source == "gemma"
    with pytest.raises(BadInputError):
        choose_template(None, "llama", override="vicuna")


def test_template_cannot_reach_python_internals():
    # Refused when chosen (tried on a sample conversation): the plain template is used instead.
    evil = "{{ messages.__class__.__mro__[1].__subclasses__() }}"
    chosen = choose_template(evil, "llama")
    assert chosen.source == "chatml" and "Python internals" in chosen.notice


def test_template_raise_exception_becomes_a_sentence():
    gguf = (
        "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}"
        "{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}"
    )
    template = choose_template(gguf, "llama")
    assert template.source == "gguf"
    with pytest.raises(ChatTemplateError, match="System role not supported"):
        template.render(CONVERSATION)
