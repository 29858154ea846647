"""A chat with a base model, framed as a short question-and-answer transcript.

A base model has learnt to continue text, not to take turns: given a chat template it echoes
the markup and rambles to the token limit. Given the beginning of a transcript in plain words
(a line saying what follows, three short exchanges, then the user's question and "Assistant:")
it writes one answer and then the next "User:" line, where the reply is cut. The frame is
plain text (no control tokens), so it works for any base model, and the engine tokenizes the
prompt as plain text: a message cannot forge the frame's turns with special tokens.

Pure functions of the conversation, so the chat session and the tests use the same frame.
"""

from __future__ import annotations

from collections.abc import Sequence

USER, ASSISTANT = "User:", "Assistant:"

INTRODUCTION = (
    "A conversation between a user and a helpful assistant. The assistant answers each "
    "question in a sentence or two."
)
EXAMPLES: tuple[tuple[str, str], ...] = (
    ("What is the capital of France?", "The capital of France is Paris."),
    ("How many legs does a spider have?", "A spider has eight legs."),
    ("Give me a word that rhymes with cat.", "Hat rhymes with cat."),
)
# Where the model starts the next turn (or a new paragraph of something else): the reply ends.
STOPS: tuple[str, ...] = ("\n" + USER, "\n" + ASSISTANT, USER, "\n\n")


def framed_prompt(system_prompt: str, turns: Sequence[tuple[str, str]], partial: str = "") -> str:
    """The transcript to continue: the introduction (the conversation's system prompt after it),
    the examples, the conversation's turns ((role, text): "user" or "assistant"), and the
    reply's beginning. `partial`: the text of a reply cut short, to continue it."""
    lines = [INTRODUCTION]
    if system_prompt.strip():
        lines.append(_one_paragraph(system_prompt))
    lines.append("")
    exchanges = [*EXAMPLES]
    pending: str | None = None
    for role, text in turns:
        if role == "user":
            if pending is not None:  # two user turns in a row: one question
                pending = f"{pending} {_one_paragraph(text)}"
            else:
                pending = _one_paragraph(text)
        elif role == "assistant" and pending is not None:
            exchanges.append((pending, _one_paragraph(text)))
            pending = None
    for question, answer in exchanges:
        lines += [f"{USER} {question}", f"{ASSISTANT} {answer}", ""]
    lines.append(f"{USER} {pending or ''}".rstrip())
    return "\n".join(lines) + f"\n{ASSISTANT}" + (f" {partial.lstrip()}" if partial else "")


def clean_reply(text: str) -> str:
    """The reply as shown: without the space after "Assistant:" or a marker cut in half."""
    text = text.strip()
    for marker in (USER, ASSISTANT):
        if text.endswith(marker):
            text = text[: -len(marker)].rstrip()
    return text


def _one_paragraph(text: str) -> str:
    """A message on one line, so a blank line inside it cannot end the transcript's turn."""
    return " ".join(text.split())
