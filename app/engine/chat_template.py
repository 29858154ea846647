"""Chat templates: the GGUF's own `tokenizer.chat_template`, or one chosen by architecture.

Templates are Jinja run in jinja2's ImmutableSandboxedEnvironment, as llama-cpp-python's
Jinja2ChatFormatter does: a template comes from a downloaded file and must not reach
Python objects. Pure Python (no llama_cpp) so it is tested without a model.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jinja2 import BaseLoader, Template
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from app.core.errors import BadInputError
from app.engine.messages import ChatMessage

# Gemma has no system role: the system prompt goes in front of the first user turn.
GEMMA_TEMPLATE = (
    "{{ bos_token }}"
    "{% set ns = namespace(system='') %}"
    "{% for m in messages %}"
    "{% if m['role'] == 'system' %}{% set ns.system = ns.system + m['content'] + '\n\n' %}"
    "{% else %}"
    "{% set role = 'model' if m['role'] == 'assistant' else 'user' %}"
    "<start_of_turn>{{ role }}\n"
    "{% if role == 'user' and ns.system %}{{ ns.system }}{% set ns.system = '' %}{% endif %}"
    "{{ m['content'] | trim }}<end_of_turn>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)

LLAMA3_TEMPLATE = (
    "{{ bos_token }}"
    "{% for m in messages %}"
    "<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] | trim }}<|eot_id|>"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)

CHATML_TEMPLATE = (
    "{% for m in messages %}"
    "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

FALLBACKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "gemma": (GEMMA_TEMPLATE, ("<end_of_turn>",)),
    "llama-3": (LLAMA3_TEMPLATE, ("<|eot_id|>",)),
    "chatml": (CHATML_TEMPLATE, ("<|im_end|>",)),
}

# End-of-turn markers worth stopping on when a template mentions them.
_TURN_MARKERS = ("<end_of_turn>", "<|eot_id|>", "<|im_end|>", "<|end|>", "<|endoftext|>", "</s>")

_GEMMA_ARCHS = ("gemma", "gemma2", "gemma3", "gemma3n", "gemma-embedding")


class ChatTemplateError(BadInputError):
    """The model's chat template could not render the conversation."""


@dataclass(frozen=True)
class ChatTemplate:
    source: str  # "gguf", or the fallback's name: "gemma", "llama-3", "chatml"
    template: str
    stop: tuple[str, ...]

    def render(
        self,
        messages: Sequence[ChatMessage],
        bos_token: str = "",
        eos_token: str = "",
        add_generation_prompt: bool = True,
    ) -> str:
        """The prompt text for `messages`, ending where the assistant's reply begins."""
        try:
            return _compile(self.template).render(
                messages=[{"role": m.role, "content": m.content} for m in messages],
                bos_token=bos_token,
                eos_token=eos_token,
                add_generation_prompt=add_generation_prompt,
            )
        except TemplateError as error:
            raise ChatTemplateError(f"The model's chat template failed: {error}.") from error


def choose_template(
    gguf_template: str | None,
    architecture: str,
    has_special_token: Callable[[str], bool] | None = None,
    override: str | None = None,
) -> ChatTemplate:
    """The template to use: `override` ("gguf" or a fallback name) if given, else the
    GGUF's own, else one chosen by architecture. `has_special_token(text)` tells whether
    the vocabulary has `text` as one token (it picks llama-3 vs chatml for llama models).
    """
    if override and override != "gguf":
        if override not in FALLBACKS:
            raise BadInputError(
                f"Unknown chat format '{override}'; use gguf, {', '.join(FALLBACKS)}."
            )
        return _fallback(override)
    if gguf_template and gguf_template.strip():
        stops = tuple(marker for marker in _TURN_MARKERS if marker in gguf_template)
        return ChatTemplate("gguf", gguf_template, stops)
    arch = (architecture or "").lower()
    if arch in _GEMMA_ARCHS:
        return _fallback("gemma")
    if arch == "llama" and has_special_token is not None and has_special_token("<|eot_id|>"):
        return _fallback("llama-3")
    return _fallback("chatml")


def _fallback(name: str) -> ChatTemplate:
    template, stop = FALLBACKS[name]
    return ChatTemplate(name, template, stop)


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.datetime.now().strftime(fmt)


_COMPILED: dict[str, Template] = {}


def _compile(template: str) -> Template:
    compiled = _COMPILED.get(template)
    if compiled is None:
        env = ImmutableSandboxedEnvironment(
            loader=BaseLoader(), trim_blocks=True, lstrip_blocks=True
        )
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = _strftime_now
        try:
            compiled = env.from_string(template)
        except TemplateError as error:
            raise ChatTemplateError(
                f"The model's chat template is not valid Jinja: {error}."
            ) from error
        _COMPILED[template] = compiled
    return compiled
