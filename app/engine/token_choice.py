"""How each token of a reply is chosen: the usual samplers, logit_bias, the response_format
grammar, and the log-probabilities of the logits a token was sampled from.

The grammar is checked lazily, as llama.cpp's own sampler does it (common/sampling.cpp,
`common_sampler_sample`, which llama-server uses): the token is sampled first without the
grammar, then only that one token is checked against it; only when the grammar rejects it is
the grammar applied to the whole vocabulary and the token sampled again from what it allows.
llama-cpp-python's `generate` puts the grammar in the sampler chain instead, which checks every
one of the vocabulary's tokens at every step: on Gemma 3's 262,144 tokens that cost 60 ms per
token for a small JSON schema, more than the model's own forward pass.

Greedy replies come out the same either way (the best token, when the grammar allows it, is
also the best of those it allows). With a temperature the lazy way samples from the model's own
distribution and keeps the token if the grammar allows it, so a seeded reply under a grammar can
differ from what sampling from the grammar-masked distribution gave; the reply follows the
grammar just the same.

logit_bias is added to the logits before anything else sees them; when logprobs are asked for,
the log-softmax of those logits (bias applied, before penalties, grammar and temperature) is kept
for the step (one vocabulary's floats, 2 MiB for Gemma 3: one step at a time, never a context).
A reply with none of the three is sampled by llama.cpp alone (llama_sampler_sample), as before.
"""

from __future__ import annotations

import ctypes

import llama_cpp
import numpy as np
import numpy.typing as npt
from llama_cpp._internals import LlamaSampler

from app.engine.messages import SamplingSettings, TokenLogprob
from app.platform.errors import BadInputError, EngineFailedError

BAN = -100.0  # as OpenAI: a bias of -100 bans the token, +100 all but forces it

Logits = npt.NDArray[np.float32]

# llama.cpp's llama_token_data, as a numpy record: the candidates are a numpy array that the
# samplers read and reorder in place.
_TOKEN_DATA = np.dtype([("id", np.intc), ("logit", np.float32), ("p", np.float32)], align=True)
assert _TOKEN_DATA.itemsize == ctypes.sizeof(llama_cpp.llama_token_data)


class LogitBiasError(BadInputError):
    """logit_bias names a token id the loaded model does not have, or bans every token the
    grammar allows next (for the server, a 400 that names logit_bias)."""

    code = "invalid_logit_bias"


class GrammarError(BadInputError):
    """The grammar text does not parse (llama.cpp logs why)."""


class TokenChoice:
    """One reply's sampling: `sample()` picks the next token from the logits llama.cpp last
    computed and accepts it into the samplers' state; `logprob(token)` after it, when asked for.

    `sampled` counts the tokens sampled, `grammar_passes` the steps on which the grammar was
    applied to the whole vocabulary (those whose first choice it rejected)."""

    def __init__(self, llm: llama_cpp.Llama, sampling: SamplingSettings) -> None:
        self.llm = llm
        n_vocab = llm.n_vocab()
        ids = [token for token, _bias in sampling.logit_bias]
        unknown = [token for token in ids if not 0 <= token < n_vocab]
        if unknown:
            raise LogitBiasError(
                f"'logit_bias' names token {unknown[0]}, which this model does not have "
                f"(its token ids go from 0 to {n_vocab - 1})."
            )
        bias = [-np.inf if b <= BAN else b for _token, b in sampling.logit_bias]
        self._bias_ids = np.array(ids, dtype=np.intp)
        self._bias = np.array(bias, dtype=np.float32)
        self.top_n = sampling.logprobs
        self._last: npt.NDArray[np.float64] | None = None
        self._logits = np.empty(n_vocab, dtype=np.float32)
        self._candidates = _Candidates(n_vocab)
        # llama-cpp-python's own chain for these settings (penalties, then top-k, typical,
        # top-p, min-p, temperature and dist, or greedy), seeded from llm.set_seed, without
        # the grammar, which is applied here, lazily.
        self._chain: LlamaSampler = llm._init_sampler(
            top_k=sampling.top_k,
            top_p=sampling.top_p,
            min_p=sampling.min_p,
            temp=sampling.temperature,
            repeat_penalty=sampling.repeat_penalty,
        )
        self._grammar = _grammar_sampler(llm, sampling.grammar) if sampling.grammar else None
        self.sampled = 0
        self.grammar_passes = 0

    def sample(self) -> int:
        """The next token, from the logits of llama.cpp's last decoded position."""
        ctx = self.llm._ctx.ctx
        self.sampled += 1
        if self._grammar is None and not len(self._bias_ids) and self.top_n is None:
            # Nothing to do between the samplers: llama.cpp samples and accepts on its own.
            token: int = llama_cpp.llama_sampler_sample(self._chain.sampler, ctx, -1)
            return token
        logits = llama_cpp.llama_get_logits_ith(ctx, -1)
        if not logits:
            raise EngineFailedError("llama.cpp has no logits to sample from.")
        self._logits[:] = np.ctypeslib.as_array(logits, shape=self._logits.shape)
        if len(self._bias_ids):
            self._logits[self._bias_ids] += self._bias
        if self.top_n is not None:
            self._last = _log_softmax(self._logits)
        candidates = self._candidates
        candidates.fill(self._logits)
        candidates.apply(self._chain)
        token, _logit = candidates.chosen()
        grammar = self._grammar
        if grammar is not None and not _allows(grammar, token):
            # Rejected: the grammar over the whole vocabulary, then the chain again (its random
            # draw too, as llama.cpp's), choosing among the tokens the grammar allows.
            self.grammar_passes += 1
            candidates.fill(self._logits)
            candidates.apply(grammar)
            candidates.apply(self._chain)
            token, logit = candidates.chosen()
            if logit == -np.inf:  # the grammar allows only tokens that logit_bias bans
                raise LogitBiasError(
                    "The reply cannot go on: 'logit_bias' bans every token the grammar "
                    "(response_format or the tool call) allows at this point."
                )
        if grammar is not None:
            grammar.accept(token)
        self._chain.accept(token)
        return token

    def logprob(self, token: int) -> TokenLogprob | None:
        """The sampled `token`'s log-probability and the top alternatives at its step."""
        if self.top_n is None or self._last is None:
            return None
        last, self._last = self._last, None
        top: tuple[tuple[str, float, bytes], ...] = ()
        if self.top_n > 0:
            best = np.argpartition(-last, self.top_n)[: self.top_n]
            best = best[np.argsort(-last[best], kind="stable")]
            top = tuple(self._entry(int(t), float(last[t])) for t in best)
        text, value, data = self._entry(token, float(last[token]))
        return TokenLogprob(text, value, data, top)

    def _entry(self, token: int, value: float) -> tuple[str, float, bytes]:
        data = self.llm.detokenize([token], special=True)
        return data.decode("utf-8", "replace"), max(value, -9999.0), data


class _Candidates:
    """Every token with its logit, as the llama_token_data_array llama.cpp's samplers work on
    (they may shrink, reorder and select in it)."""

    def __init__(self, n_vocab: int) -> None:
        self.data = np.zeros(n_vocab, dtype=_TOKEN_DATA)
        self._ids = np.arange(n_vocab, dtype=np.intc)
        self.array = llama_cpp.llama_token_data_array(
            self.data.ctypes.data_as(llama_cpp.llama_token_data_p), n_vocab, -1, False
        )

    def fill(self, logits: Logits) -> None:
        self.data["id"] = self._ids
        self.data["logit"] = logits
        self.data["p"] = 0.0
        self.array.size = len(self.data)
        self.array.selected = -1
        self.array.sorted = False

    def apply(self, sampler: LlamaSampler) -> None:
        llama_cpp.llama_sampler_apply(sampler.sampler, ctypes.byref(self.array))

    def chosen(self) -> tuple[int, float]:
        """The selected token and its logit after the samplers."""
        index = int(self.array.selected)
        if not 0 <= index < int(self.array.size):
            raise EngineFailedError("llama.cpp's samplers selected no token.")
        entry = self.data[index]
        return int(entry["id"]), float(entry["logit"])


def _grammar_sampler(llm: llama_cpp.Llama, grammar: str) -> LlamaSampler:
    """A chain of one: llama.cpp's grammar sampler for `grammar` (GBNF, root rule `root`)."""
    sampler = llama_cpp.llama_sampler_init_grammar(
        llm._model.vocab, grammar.encode("utf-8"), b"root"
    )
    if not sampler:
        raise GrammarError("The grammar the reply must follow does not parse.")
    chain = LlamaSampler()
    llama_cpp.llama_sampler_chain_add(chain.sampler, sampler)
    return chain


def _allows(grammar: LlamaSampler, token: int) -> bool:
    """Whether the grammar, in its state now, allows `token` next: it is applied to an array of
    that one token (common_sampler_sample's rejection check)."""
    single = llama_cpp.llama_token_data(token, 1.0, 0.0)
    array = llama_cpp.llama_token_data_array(ctypes.pointer(single), 1, -1, False)
    llama_cpp.llama_sampler_apply(grammar.sampler, ctypes.byref(array))
    return bool(single.logit != -np.inf)


def _log_softmax(logits: Logits) -> npt.NDArray[np.float64]:
    wide = logits.astype(np.float64)
    peak = float(np.max(wide))
    total = float(np.log(np.sum(np.exp(wide - peak))))
    return wide - (peak + total)
