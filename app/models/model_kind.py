"""Whether a GGUF holds a base model (it continues text) or a chat model (it answers), from
what its header says: the chat template, and the words of its name and file name.

A base model in a chat window gives repetitive continuations of the conversation's markup;
the chat page shows such a model a completion box instead (app/ui/chat/completion_panel.py).
Pure functions over metadata values, so the engine and tests use the same rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

# Words that instruction-tuned releases put in their names ("gemma-3-1b-it", "Qwen2.5-0.5B-
# Instruct", "…-chat", "…-SFT"); "it" only counts as a whole word.
CHAT_WORDS = frozenset(
    {"it", "instruct", "chat", "sft", "dpo", "rlhf", "assistant", "conversational"}
)
BASE_WORDS = frozenset({"base", "pretrained", "pt"})
_NAME_KEYS = ("general.name", "general.finetune", "general.basename")


def name_words(texts: Iterable[str]) -> set[str]:
    """The lower-case words of names ('Gemma-3-1B-it' -> gemma, 3, 1b, it)."""
    return {w for text in texts for w in re.split(r"[^0-9a-z]+", text.lower()) if w}


def base_model_reason(
    metadata: Mapping[str, object], has_chat_template: bool, file_name: str = ""
) -> str:
    """Why this model looks like a base model, as the end of 'This is a base model: …';
    '' when it looks like a chat model.

    A name that says instruct/chat wins (such a model without a template still answers through
    the template chosen by architecture); otherwise no chat template, or a name that says base,
    makes it a base model. `general.tags` is read when it is a list of strings."""
    texts = [str(metadata.get(k) or "") for k in _NAME_KEYS] + [file_name]
    tags = metadata.get("general.tags")
    if isinstance(tags, (list, tuple)):
        texts += [t for t in tags if isinstance(t, str)]
    words = name_words(texts)
    if words & CHAT_WORDS:
        return ""
    if not has_chat_template:
        return "its file has no chat template and its name does not say it is instruction-tuned"
    if words & BASE_WORDS:
        return "its name says it is a base model"
    return ""
