"""What shapes each token's choice beyond the usual samplers, and what is read off it: the
response_format grammar, logit_bias, and the log-probabilities of the logits a token was
sampled from.

llama-cpp-python runs a logits processor first in its sampler chain, on the candidates in
token-id order; ours adds the bias there and, when logprobs are asked for, keeps the
log-softmax of that step (one vocabulary's floats, 1 MiB for Gemma 3's 262,144 tokens: one
step at a time, never a whole context).
"""

from __future__ import annotations

import llama_cpp
import numpy as np
import numpy.typing as npt
from llama_cpp.llama_grammar import LlamaGrammar

from app.engine.messages import SamplingSettings, TokenLogprob
from app.platform.errors import BadInputError

BAN = -100.0  # as OpenAI: a bias of -100 bans the token, +100 all but forces it

Logits = npt.NDArray[np.float32]


class LogitBiasError(BadInputError):
    """logit_bias names a token id the loaded model does not have (a 400 for the server)."""

    code = "invalid_logit_bias"


class TokenChoice:
    """The grammar and logits processors for one reply's sampling (llm.generate's
    `grammar` and `logits_processor`), and `logprob(token)` after each sampled token."""

    def __init__(self, llm: llama_cpp.Llama, sampling: SamplingSettings) -> None:
        self.llm = llm
        self.grammar = LlamaGrammar.from_string(sampling.grammar) if sampling.grammar else None
        ids = [token for token, _bias in sampling.logit_bias]
        unknown = [token for token in ids if not 0 <= token < llm.n_vocab()]
        if unknown:
            raise LogitBiasError(
                f"'logit_bias' names token {unknown[0]}, which this model does not have "
                f"(its token ids go from 0 to {llm.n_vocab() - 1})."
            )
        bias = [-np.inf if b <= BAN else b for _token, b in sampling.logit_bias]
        self._bias_ids = np.array(ids, dtype=np.intp)
        self._bias = np.array(bias, dtype=np.float32)
        self.top_n = sampling.logprobs
        self._last: npt.NDArray[np.float64] | None = None

    @property
    def processors(self) -> llama_cpp.LogitsProcessorList | None:
        if not len(self._bias_ids) and self.top_n is None:
            return None
        return llama_cpp.LogitsProcessorList([self._process])

    def _process(self, _input_ids: npt.NDArray[np.intc], logits: Logits) -> Logits:
        if len(self._bias_ids):
            logits[self._bias_ids] += self._bias
        if self.top_n is not None:
            self._last = _log_softmax(logits)
        return logits

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


def _log_softmax(logits: Logits) -> npt.NDArray[np.float64]:
    wide = logits.astype(np.float64)
    peak = float(np.max(wide))
    total = float(np.log(np.sum(np.exp(wide - peak))))
    return wide - (peak + total)
