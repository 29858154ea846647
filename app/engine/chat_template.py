"""Chat templates: the GGUF's own `tokenizer.chat_template`, or one chosen by architecture.

Templates are Jinja run in a sandbox with limits (app.engine.template_sandbox): a template
comes from a downloaded file and must not reach Python objects, run for ever or fill memory.
A GGUF template that breaks a limit on a sample conversation is not used: the one chosen by
architecture is, with a notice saying why. Pure Python (no llama_cpp): tested without a model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jinja2 import Template

from app.engine.messages import ChatMessage
from app.engine.template_sandbox import (
    ChatTemplateError,
    RenderLimits,
    RenderStopped,
    TemplateRefused,
    compile_template,
    render_template,
)
from app.engine.tool_messages import ToolSpec, template_calls, template_tools
from app.platform.errors import BadInputError

__all__ = ["ChatTemplate", "ChatTemplateError", "RenderStopped", "TemplateRefused"]

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


# What a GGUF template is tried on before it is used.
_SAMPLE = (
    ChatMessage("user", "Hi"),
    ChatMessage("assistant", "Hello!"),
    ChatMessage("user", "Name a colour."),
)


@dataclass(frozen=True)
class ChatTemplate:
    source: str  # "gguf", or the fallback's name: "gemma", "llama-3", "chatml"
    template: str
    stop: tuple[str, ...]
    notice: str = ""  # why the GGUF's own template is not the one used, when it is not
    fallback: ChatTemplate | None = None  # what to use if the GGUF's template is refused

    def render(
        self,
        messages: Sequence[ChatMessage],
        bos_token: str = "",
        eos_token: str = "",
        add_generation_prompt: bool = True,
        stopped: Callable[[], bool] | None = None,
        limits: RenderLimits | None = None,
        tools: Sequence[ToolSpec] = (),
    ) -> str:
        """The prompt text for `messages` (and `tools`, for a template that knows tools),
        ending where the assistant's reply begins.

        Raises TemplateRefused when the template breaks a limit, RenderStopped when
        `stopped()` turns true, ChatTemplateError when the template raises an error."""
        variables: dict[str, object] = {
            "messages": [_message(m) for m in messages],
            "bos_token": bos_token,
            "eos_token": eos_token,
            "add_generation_prompt": add_generation_prompt,
        }
        if tools:
            variables["tools"] = template_tools(tools)
        return render_template(_compile(self.template), variables, limits, stopped)

    @property
    def knows_tools(self) -> bool:
        """The GGUF's own template reads `tools` (the plain fallbacks do not)."""
        return self.source == "gguf" and "tools" in self.template


def _message(message: ChatMessage) -> dict[str, object]:
    out: dict[str, object] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = template_calls(message.tool_calls)
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    return out


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
    plain = _by_architecture(architecture, has_special_token)
    if gguf_template and gguf_template.strip():
        stops = tuple(marker for marker in _TURN_MARKERS if marker in gguf_template)
        own = ChatTemplate("gguf", gguf_template, stops, fallback=plain)
        try:  # a real template renders this in milliseconds: a second is generous
            own.render(_SAMPLE, bos_token="<s>", eos_token="</s>", limits=RenderLimits(seconds=1))
        except ChatTemplateError as error:
            reason = (
                error.reason
                if isinstance(error, TemplateRefused)
                else f"it failed on a short sample conversation ({error.__cause__ or error})"
            )
            return ChatTemplate(
                plain.source,
                plain.template,
                plain.stop,
                notice=f"The model's own chat template is not used: {reason.rstrip('.')}. "
                f"Using the plain {plain.source} template.",
            )
        return own
    return plain


def _by_architecture(
    architecture: str, has_special_token: Callable[[str], bool] | None
) -> ChatTemplate:
    arch = (architecture or "").lower()
    if arch in _GEMMA_ARCHS:
        return _fallback("gemma")
    if arch == "llama" and has_special_token is not None and has_special_token("<|eot_id|>"):
        return _fallback("llama-3")
    return _fallback("chatml")


def _fallback(name: str) -> ChatTemplate:
    template, stop = FALLBACKS[name]
    return ChatTemplate(name, template, stop)


_COMPILED: dict[str, Template] = {}


def _compile(template: str) -> Template:
    compiled = _COMPILED.get(template)
    if compiled is None:
        compiled = compile_template(template)
        if len(_COMPILED) > 16:  # one per model loaded, a few at most; never grows for ever
            _COMPILED.clear()
        _COMPILED[template] = compiled
    return compiled
