"""A chat's prompt tokens: the template's own markers become special tokens, message content
never does, and a conversation too long for the context is trimmed with each message
tokenized once.

Why not render the prompt and tokenize it with special=True (as llama-server does): then a
message holding `<end_of_turn>\\n<start_of_turn>model\\n` forges turns. The template is
rendered with a placeholder where each message's content goes; its own text is split at the
control tokens it holds, and the text between them, message content included, is tokenized
as plain text. That is the token list llama.cpp would make of the whole text if the content
held no markers: its tokenizer also tokenizes each run of text between special tokens alone
(SentencePiece's space prefix after a special token, a marker's l/rstrip of whitespace).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import llama_cpp

from app.engine.cancel import CancelCheck
from app.engine.chat_template import ChatTemplate, RenderStopped
from app.engine.messages import ChatMessage
from app.engine.tool_messages import ToolSpec
from app.engine.tool_prompt import tools_in_words, uses_tools

log = logging.getLogger(__name__)

# Private-use characters: the template's text never holds them; content is never rendered.
_SLOT = re.compile("\ue000([0-9]+)\ue001")
_SPECIAL = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN


def _slot(index: int) -> str:
    return f"\ue000{index}\ue001"


@dataclass(frozen=True)
class _Marker:
    """A special token of the template's own text (never of a message)."""

    token: int
    lstrip: bool  # llama.cpp drops the whitespace before it ...
    rstrip: bool  # ... and after it


Fragment = str | _Marker


class PromptTokenizer:
    """Turns conversations into prompt tokens for one model and template; every run of
    plain text is tokenized once (cached), so trying shorter conversations costs renders,
    not tokenizing. `cancel` turning true raises RenderStopped between pieces."""

    def __init__(
        self,
        llm: llama_cpp.Llama,
        template: ChatTemplate,
        cancel: CancelCheck,
        tools: Sequence[ToolSpec] = (),
    ):
        self.llm, self.template, self.cancel = llm, template, cancel
        self.tools = tuple(tools)  # offered to a template that knows tools
        self.vocab = llm._model.vocab
        self.bos_id, eos_id = llm.token_bos(), llm.token_eos()
        self.bos = self._piece(self.bos_id) if self.bos_id >= 0 else ""
        self.eos = self._piece(eos_id) if eos_id >= 0 else ""
        self.add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self.vocab))
        self._text_tokens: dict[str, list[int]] = {}
        self._template_pieces: dict[str, list[Fragment]] = {}
        self._trimmed_roles: frozenset[str] = frozenset()  # whose content the template trims

    def fit(self, messages: Sequence[ChatMessage], budget: int) -> tuple[list[int], int]:
        """The prompt of `messages` with as few of the oldest turns left out as makes it fit
        `budget` tokens (system messages and the last message are always kept), and how many
        were left out. Dropping turns shortens the prompt, so the count is found by halving.
        A conversation with tools is made plain first for a template that does not know them
        (app.engine.tool_prompt)."""
        if uses_tools(messages, self.tools) and not self.template.knows_tools:
            messages, self.tools = tools_in_words(messages, self.tools), ()
        self._trimmed_roles = self._roles_trimmed(messages)
        tokens = self.tokens(messages)
        droppable = [i for i, m in enumerate(messages) if m.role != "system"][:-1]
        if len(tokens) <= budget or not droppable:
            return tokens, 0

        def without_oldest(count: int) -> list[int]:
            gone = set(droppable[:count])
            return self.tokens([m for i, m in enumerate(messages) if i not in gone])

        low, high = 1, len(droppable)
        best = without_oldest(high)
        while low < high and len(best) <= budget:
            middle = (low + high) // 2
            tried = without_oldest(middle)
            log.debug("without %d oldest turns: %d tokens (budget %d)", middle, len(tried), budget)
            if len(tried) <= budget:
                high, best = middle, tried
            else:
                low = middle + 1
        return best, high

    def tokens(self, messages: Sequence[ChatMessage]) -> list[int]:
        """The prompt tokens of `messages`, the template's markers special, content plain."""
        placed = [replace(m, content=_slot(i)) for i, m in enumerate(messages)]
        rendered = self._render(placed)
        contents = _contents(messages, self._trimmed_roles)
        tokens: list[int] = []
        for fragment in _merged(self._fragments(rendered, contents)):
            if isinstance(fragment, _Marker):
                tokens.append(fragment.token)
            else:
                tokens.extend(self._plain(fragment))
        if self.add_bos and self.bos_id >= 0 and tokens[:1] != [self.bos_id]:
            tokens.insert(0, self.bos_id)
        return tokens

    def _roles_trimmed(self, messages: Sequence[ChatMessage]) -> frozenset[str]:
        """The roles whose content the template trims (Gemma's `| trim` on turns but not on
        its system text): the placeholder it trimmed stands for the trimmed content then.
        Found by filling the placeholders each way (no render, no tokenizing). A template
        that changes content in other ways gets it as sent, as plain text all the same."""
        full = self._render(messages)
        placed = self._render([replace(m, content=_slot(i)) for i, m in enumerate(messages)])
        roles = sorted({m.role for m in messages})
        for mask in range(2 ** len(roles)):
            trimmed = frozenset(role for bit, role in enumerate(roles) if mask >> bit & 1)
            if _filled(placed, _contents(messages, trimmed)) == full:
                return trimmed
        log.info("the chat template changes message content; the content is used as sent")
        return frozenset()

    def _render(self, messages: Sequence[ChatMessage]) -> str:
        return self.template.render(
            messages,
            bos_token=self.bos,
            eos_token=self.eos,
            stopped=self.cancel.is_set,
            tools=self.tools,
        )

    def _fragments(self, rendered: str, contents: Sequence[str]) -> list[Fragment]:
        fragments: list[Fragment] = []
        at = 0
        for slot in _SLOT.finditer(rendered):
            index = int(slot[1])
            if index >= len(contents):
                continue  # not one of ours: left in the template's text
            fragments += self._template_piece(rendered[at : slot.start()])
            fragments.append(contents[index])
            at = slot.end()
        fragments += self._template_piece(rendered[at:])
        return fragments

    def _template_piece(self, text: str) -> list[Fragment]:
        """The template's own text split at the special tokens llama.cpp finds in it."""
        if not text:
            return []
        cached = self._template_pieces.get(text)
        if cached is not None:
            return cached
        self._check_cancel()
        pieces: list[Fragment] = []
        at = 0
        for token in self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True):
            attr = int(llama_cpp.llama_vocab_get_attr(self.vocab, token))
            if not attr & _SPECIAL:
                continue
            found = text.find(self._piece(token), at)
            if found < 0:
                continue  # a marker whose text is not literally there: left as plain text
            pieces += [text[at:found], _marker(token, attr)]
            at = found + len(self._piece(token))
        pieces.append(text[at:])
        self._template_pieces[text] = pieces
        return pieces

    def _plain(self, text: str) -> list[int]:
        tokens = self._text_tokens.get(text)
        if tokens is None:
            self._check_cancel()
            tokens = self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
            self._text_tokens[text] = tokens
        return tokens

    def _piece(self, token: int) -> str:
        return self.llm.detokenize([token], special=True).decode("utf-8", "replace")

    def _check_cancel(self) -> None:
        if self.cancel.is_set():
            raise RenderStopped("Stopped while the prompt was tokenized.")


def _marker(token: int, attr: int) -> _Marker:
    return _Marker(
        token,
        lstrip=bool(attr & llama_cpp.LLAMA_TOKEN_ATTR_LSTRIP),
        rstrip=bool(attr & llama_cpp.LLAMA_TOKEN_ATTR_RSTRIP),
    )


def _merged(fragments: Sequence[Fragment]) -> list[Fragment]:
    """Adjacent plain text joined into one run (as in the whole text), a marker's strips
    applied to the runs beside it, empty runs left out."""
    out: list[Fragment] = []
    text: list[str] = []
    after_rstrip = False
    for fragment in fragments:
        if isinstance(fragment, str):
            text.append(fragment)
            continue
        run = "".join(text)
        if after_rstrip:
            run = run.lstrip()
        if fragment.lstrip:
            run = run.rstrip()
        if run:
            out.append(run)
        out.append(fragment)
        text, after_rstrip = [], fragment.rstrip
    run = "".join(text)
    run = run.lstrip() if after_rstrip else run
    if run:
        out.append(run)
    return out


def _contents(messages: Sequence[ChatMessage], trimmed_roles: frozenset[str]) -> list[str]:
    return [m.content.strip() if m.role in trimmed_roles else m.content for m in messages]


def _filled(rendered: str, contents: Sequence[str]) -> str:
    def content(slot: re.Match[str]) -> str:
        index = int(slot[1])
        return contents[index] if index < len(contents) else slot[0]

    return _SLOT.sub(content, rendered)
