"""One streamed generation inside the engine process.

While it runs, llama.cpp's abort callback watches the shared cancel flag (natively, see
app.engine.cancel), so Stop cuts a token or a prompt batch short. Between tokens the
loop checks the flag too, decodes UTF-8 incrementally, holds back text that might start
a stop string, and sends one Token event per piece of text. Before the prompt is evaluated
it sends ContextTrimmed (when old messages were left out) and PromptStarted; every event
carries the engine's time, so the GUI never has to guess when a phase began.
"""

from __future__ import annotations

import codecs
import ctypes
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

import llama_cpp

from app.chats.base_model_frame import framed_prompt
from app.engine.cancel import CancelCheck, native_abort_callback
from app.engine.chat_template import ChatTemplate, RenderStopped, TemplateRefused
from app.engine.messages import (
    ContextTrimmed,
    Finished,
    Generate,
    PromptStarted,
    TemplateFallback,
    Token,
    TokenLogprob,
)
from app.engine.prompt_tokens import PromptTokenizer
from app.engine.token_choice import TokenChoice
from app.platform.errors import ContextLengthExceededError, EngineFailedError

log = logging.getLogger(__name__)

Emit = Callable[[object], None]


class StopFilter:
    """Holds back text that could be the start of a stop string; cuts at a full one."""

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = tuple(s for s in stops if s)
        self.pending = ""
        self.stopped = False
        self.matched = ""  # the stop string that ended the text

    def push(self, text: str) -> str:
        """Add text; return the part that is safe to show now."""
        self.pending += text
        cut = min((i for i in (self.pending.find(s) for s in self.stops) if i >= 0), default=-1)
        if cut >= 0:
            self.matched = next(s for s in self.stops if self.pending.find(s) == cut)
            out, self.pending, self.stopped = self.pending[:cut], "", True
            return out
        hold = 0
        for stop in self.stops:
            for k in range(min(len(stop) - 1, len(self.pending)), hold, -1):
                if self.pending.endswith(stop[:k]):
                    hold = k
                    break
        out = self.pending[: len(self.pending) - hold]
        self.pending = self.pending[len(self.pending) - hold :]
        return out

    def flush(self) -> str:
        out, self.pending = self.pending, ""
        return out


def run_generation(
    llm: llama_cpp.Llama,
    command: Generate,
    template: ChatTemplate,
    cancel: CancelCheck,
    emit: Emit,
) -> Finished:
    """Generate for `command`, emitting Token events; returns the Finished event."""
    started = time.perf_counter()
    s = command.sampling
    n_ctx = llm.n_ctx()
    reserve = min(s.max_tokens if s.max_tokens > 0 else n_ctx // 4, n_ctx // 2)
    budget = n_ctx - max(reserve, 1)
    try:
        tokens, dropped = _prompt_tokens(llm, command, template, budget, cancel)
    except TemplateRefused as refused:
        template = _fallback_template(template, refused, emit)
        tokens, dropped = _prompt_tokens(llm, command, template, budget, cancel)
    except RenderStopped:
        return _finished(command, "", 0, 0, started, 0.0, 0.0, "cancelled", 0)
    room = n_ctx - len(tokens)
    if room <= 0:
        raise ContextLengthExceededError(
            f"The prompt is {len(tokens)} tokens, which does not fit the {n_ctx}-token context."
        )
    if dropped:
        emit(ContextTrimmed(command.request_id, dropped, n_ctx, len(tokens)))
    max_new = min(s.max_tokens, room) if s.max_tokens > 0 else room
    if s.seed is not None:
        llm.set_seed(s.seed)
    chat = bool(command.messages) and not command.framed
    stops = StopFilter(tuple(s.stop) + (template.stop if chat else ()))
    reply = _Reply(command.request_id, len(tokens), stops, emit)
    choice = TokenChoice(llm, s)  # refuses a bias on a token the model does not have

    emit(PromptStarted(command.request_id, len(tokens), time.monotonic()))
    with _abort_on(llm, cancel):
        if not _prefill(llm, tokens, cancel):
            return _finished(
                command, "", len(tokens), 0, started, 0.0, 0.0, "cancelled", len(tokens)
            )
        _sample(llm, max_new, cancel, reply, choice)
    reply.flush()
    finished = _finished(
        command,
        "".join(reply.parts),
        len(tokens),
        reply.generated,
        started,
        reply.first_at,
        reply.last_at,
        reply.reason,
        len(tokens) + reply.generated,
    )
    return replace(finished, logprobs=tuple(reply.logprobs), stop_string=stops.matched)


def _fallback_template(
    template: ChatTemplate, refused: TemplateRefused, emit: Emit
) -> ChatTemplate:
    """The plain template to use instead of the model's own, which `refused` this
    conversation (said with TemplateFallback); re-raises when there is none."""
    if template.fallback is None:
        raise refused
    fallback = template.fallback
    emit(
        TemplateFallback(
            fallback.source,
            f"The model's own chat template is not used: {refused.reason}. "
            f"Using the plain {fallback.source} template.",
        )
    )
    return fallback


class _Reply:
    """The reply as it is sampled: its text, sent on as Token events (held back where it
    might start a stop string), token count, timings and why it ended."""

    def __init__(self, request_id: str, n_prompt: int, stops: StopFilter, emit: Emit) -> None:
        self.request_id = request_id
        self.n_prompt = n_prompt
        self.stops = stops
        self.emit = emit
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.parts: list[str] = []
        self.generated = 0
        self.first_at = self.last_at = 0.0
        self.reason = "length"
        # Log-probabilities of the tokens whose text is sent, and of those held back.
        self.logprobs: list[TokenLogprob] = []
        self.pending_logprobs: list[TokenLogprob] = []

    def add(self, data: bytes, logprob: TokenLogprob | None = None) -> None:
        """One more generated token's bytes (and its log-probability, when asked for)."""
        self.generated += 1
        if logprob is not None:
            self.pending_logprobs.append(logprob)
        self._send(self.stops.push(self.decoder.decode(data)))

    def flush(self) -> None:
        """Send what was held back, unless a stop string ended the reply."""
        if not self.stops.stopped:
            self._send(self.stops.flush() + self.decoder.decode(b"", final=True))

    def _send(self, piece: str) -> None:
        if piece:
            self.parts.append(piece)
            n_past = self.n_prompt + self.generated
            logprobs, self.pending_logprobs = tuple(self.pending_logprobs), []
            self.logprobs += logprobs
            self.emit(Token(self.request_id, piece, n_past, time.monotonic(), logprobs))


def _sample(
    llm: llama_cpp.Llama,
    max_new: int,
    cancel: CancelCheck,
    reply: _Reply,
    choice: TokenChoice,
) -> None:
    """Sample tokens after the evaluated prompt into `reply` until it ends: each token is
    chosen from the last decoded position's logits (`choice`, which checks a grammar lazily,
    as llama.cpp's own sampler does), then decoded so that the next one can be chosen."""
    vocab = llm._model.vocab
    while True:
        token = choice.sample()
        reply.last_at = time.perf_counter()
        if not reply.first_at:
            reply.first_at = reply.last_at
        if llama_cpp.llama_vocab_is_eog(vocab, token):
            reply.reason = "stop"
            break
        reply.add(llm.detokenize([token]), choice.logprob(token))
        if reply.stops.stopped:
            reply.reason = "stop"
            break
        if cancel.is_set():
            reply.reason = "cancelled"
            break
        if reply.generated >= max_new:
            break
        try:
            llm.eval([token])
        except RuntimeError:
            if not cancel.is_set():
                raise
            # llama_decode returned 2: aborted mid-token. llama.cpp dropped that
            # token's cache entries and llm.n_tokens never counted it.
            reply.reason = "cancelled"
            break


def _finished(
    command: Generate,
    text: str,
    n_prompt: int,
    generated: int,
    started: float,
    first_at: float,
    last_at: float,
    reason: str,
    n_past: int,
) -> Finished:
    decode_s = last_at - first_at
    # The first token's time is prompt processing; decode speed counts the ones after it.
    speed = (generated - 1) / decode_s if generated > 1 and decode_s > 0 else 0.0
    return Finished(
        request_id=command.request_id,
        text=text,
        prompt_tokens=n_prompt,
        generated_tokens=generated,
        time_to_first_token_s=(first_at - started) if first_at else 0.0,
        tokens_per_second=speed,
        stop_reason=reason,
        n_past=n_past,
        at=time.monotonic(),
    )


def _prompt_tokens(
    llm: llama_cpp.Llama,
    command: Generate,
    template: ChatTemplate,
    budget: int,
    cancel: CancelCheck,
) -> tuple[list[int], int]:
    """The prompt's tokens, and how many of the oldest chat messages were dropped to fit
    `budget` (system messages and the last message are always kept)."""
    if command.framed:
        return _framed_tokens(llm, command, budget)
    if not command.messages:
        text = command.prompt or ""
        tokens = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
        if not tokens:
            raise EngineFailedError("The prompt is empty.")
        return list(tokens), 0
    tokenizer = PromptTokenizer(llm, template, cancel, command.tools)
    messages = command.messages
    if command.continue_reply and len(messages) > 1 and messages[-1].role == "assistant":
        # The turns before the reply, its generation prompt, then its text as plain tokens
        # (no end-of-turn marker): the model takes the reply up where it stopped.
        partial = llm.tokenize(messages[-1].content.encode("utf-8"), add_bos=False, special=False)
        tokens, dropped = tokenizer.fit(messages[:-1], budget - len(partial))
        return tokens + list(partial), dropped
    return tokenizer.fit(messages, budget)


def _framed_tokens(llm: llama_cpp.Llama, command: Generate, budget: int) -> tuple[list[int], int]:
    """A base model's chat as the question-and-answer transcript it continues (plain text: a
    message cannot forge a turn with special tokens), with as few of the oldest turns left out
    as makes it fit `budget` (the last question is always kept), and how many were left out."""
    system = "\n".join(m.content for m in command.messages if m.role == "system")
    turns = [(m.role, m.content) for m in command.messages if m.role != "system"]
    partial = ""
    if command.continue_reply and turns and turns[-1][0] == "assistant":
        partial = turns.pop()[1]  # the reply cut at its token limit goes on

    def without_oldest(count: int) -> list[int]:
        text = framed_prompt(system, turns[count:], partial)
        return list(llm.tokenize(text.encode("utf-8"), add_bos=True, special=False))

    best = without_oldest(0)
    if len(best) <= budget or len(turns) <= 1:
        return best, 0
    low, high = 1, len(turns) - 1  # leaving out more turns only shortens it: halve
    best = without_oldest(high)
    while low < high and len(best) <= budget:
        middle = (low + high) // 2
        tried = without_oldest(middle)
        if len(tried) <= budget:
            high, best = middle, tried
        else:
            low = middle + 1
    return best, high


def _prefill(llm: llama_cpp.Llama, tokens: list[int], cancel: CancelCheck) -> bool:
    """Evaluate the prompt (reusing the cached prefix); False if cancelled meanwhile.

    Afterwards llm holds exactly `tokens`, and its logits are the last token's: the
    first token of the reply is sampled from them at once.
    """
    cached = 0
    previous = llm.input_ids[: llm.n_tokens].tolist()
    # The common prefix of two token lists of any lengths: stopping at the shorter is the point.
    for a, b in zip(previous, tokens, strict=False):
        if a != b:
            break
        cached += 1
    # At least one token is evaluated so the logits belong to this prompt.
    cached = min(cached, len(tokens) - 1)
    if 0 < cached and not _window_intact(llm, cached):
        cached = 0
    if cached < llm.n_tokens:
        if cached == 0 or not llm._ctx.kv_cache_seq_rm(-1, cached, -1):
            llm.reset()
            cached = 0
        else:
            llm.n_tokens = cached
    rest = tokens[cached:]
    for i in range(0, len(rest), llm.n_batch):
        if cancel.is_set():
            return False
        try:
            llm.eval(rest[i : i + llm.n_batch])
        except RuntimeError:
            if cancel.is_set():  # llama_decode returned 2: aborted by our callback
                llm.reset()
                return False
            raise
    return True


def _window_intact(llm: llama_cpp.Llama, cached: int) -> bool:
    """Whether a sliding-window cache still holds the positions that tokens after
    `cached` attend to. It drops positions older than its window as it goes, so rolling
    back further than that would attend to nothing (llama.cpp's server checks the same)."""
    # llama_cpp's ctypes_function decorator erases these functions' int returns to Any.
    n_swa: int = llama_cpp.llama_model_n_swa(llm._model.model)
    if n_swa <= 0:
        return True
    pos_min: int = llama_cpp.llama_memory_seq_pos_min(llm._ctx.memory, 0)
    return pos_min <= max(0, cached - n_swa - 1)


_ABORT_TYPE = llama_cpp.ggml_abort_callback
_set_abort = llama_cpp.llama_cpp._lib.llama_set_abort_callback
_set_abort.argtypes = [ctypes.c_void_p, _ABORT_TYPE, ctypes.c_void_p]
_set_abort.restype = None
_NATIVE_ABORT = native_abort_callback()


@contextmanager
def _abort_on(llm: llama_cpp.Llama, cancel: CancelCheck) -> Iterator[None]:
    """While inside, llama.cpp's compute stops soon after `cancel` is set."""
    address = getattr(cancel, "address", None)
    if _NATIVE_ABORT is not None and address is not None:
        callback, data = _NATIVE_ABORT, ctypes.c_void_p(address)
    else:  # a Python callback after every graph node: slow, so only without a native one
        callback, data = _ABORT_TYPE(lambda _data: bool(cancel.is_set())), None
    _set_abort(llm._ctx.ctx, callback, data)
    try:
        yield
    finally:
        _set_abort(llm._ctx.ctx, _ABORT_TYPE(), None)
