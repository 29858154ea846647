"""A grammar is checked lazily, as llama.cpp's own sampler does (app/engine/token_choice.py):
each token is sampled without it and only that token is checked; the grammar masks the whole
vocabulary only on a step whose first choice it rejects, and the token is then sampled again
from what it allows.

The engine's generation code runs in this process on the real starter model (262,144 tokens).
What is compared is computed in the same run, on the same prompt path, so no test depends on
the text this CPU's arithmetic makes; the work done is counted, never timed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import llama_cpp
import pytest

from app.engine import generation
from app.engine.cancel import CancelFlag
from app.engine.messages import Finished, Generate, SamplingSettings, Token
from app.engine.response_format import response_grammar
from app.engine.token_choice import LogitBiasError, TokenChoice
from app.load.profile import LoadProfile
from tests.engine_threads import ENGINE_THREADS

pytestmark = pytest.mark.slow

PROMPT = "The capital of France is"
GREEDY = SamplingSettings(temperature=0.0, repeat_penalty=1.0, max_tokens=12)
ANY_TEXT = r"root ::= [^\x00]*"  # every token a model writes (and its end)
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 24}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}


@pytest.fixture(scope="module")
def model(starter_model_path) -> Iterator[Any]:
    """The starter model loaded by the engine's own loader, in this process."""
    from app.engine.llama_log import install
    from app.engine.loader import load_model

    options = LoadProfile(
        model_path=str(starter_model_path), n_ctx=512, n_threads=ENGINE_THREADS, n_gpu_layers=0
    )
    loaded = load_model(options, install())
    yield loaded
    loaded.llm.close()


class Recorded(TokenChoice):
    """The engine's TokenChoice (put in its place by the `recorded` fixture), keeping itself
    and the tokens it sampled (an end-of-generation token included) for the test to read."""

    made: list[Recorded] = []

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.tokens: list[int] = []
        Recorded.made.append(self)

    def sample(self) -> int:
        self.tokens.append(super().sample())
        return self.tokens[-1]


@pytest.fixture(autouse=True)
def recorded(monkeypatch) -> None:
    monkeypatch.setattr(generation, "TokenChoice", Recorded)
    monkeypatch.setattr(Recorded, "made", [])


class Reply:
    """One run of the engine's generation: its events, the Finished event, and the TokenChoice
    that chose its tokens (with its counts)."""

    def __init__(
        self,
        model: Any,
        sampling: SamplingSettings,
        prompt: str = PROMPT,
        flag: CancelFlag | None = None,
        on_token: Callable[[Token], None] | None = None,
    ) -> None:
        self.events: list[object] = []

        def emit(event: object) -> None:
            self.events.append(event)
            if on_token is not None and isinstance(event, Token):
                on_token(event)

        made = len(Recorded.made)
        command = Generate("r", sampling, prompt=prompt)
        self.finished: Finished = generation.run_generation(
            model.llm, command, model.template, flag or CancelFlag(), emit
        )
        (self.choice,) = Recorded.made[made:]

    @property
    def streamed(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, Token))


@pytest.fixture
def vocabulary_passes(monkeypatch, model) -> list[int]:
    """The size of every candidate array a llama.cpp sampler is applied to, as it goes in."""
    sizes: list[int] = []
    real = llama_cpp.llama_sampler_apply

    def spy(sampler: Any, array: Any) -> None:
        sizes.append(int(array._obj.size))  # ctypes.byref's structure
        real(sampler, array)

    monkeypatch.setattr(llama_cpp, "llama_sampler_apply", spy)
    return sizes


def test_a_grammar_that_allows_every_token_never_masks_the_whole_vocabulary(
    model, vocabulary_passes
):
    Reply(model, GREEDY)  # the prompt in the cache: both replies below sample from it alike
    plain = Reply(model, GREEDY)
    vocabulary_passes.clear()
    checked = Reply(model, replace(GREEDY, grammar=ANY_TEXT))
    sampled = checked.choice.sampled
    assert sampled >= checked.finished.generated_tokens > 0
    # Per token one pass of the sampler chain over the vocabulary and one grammar check of the
    # token it chose: the grammar never masked all 262,144 candidates (it did on every token
    # when it sat in llama-cpp-python's sampler chain).
    assert checked.choice.grammar_passes == 0
    assert vocabulary_passes.count(model.llm.n_vocab()) == sampled
    assert vocabulary_passes.count(1) == sampled
    assert checked.finished.text == plain.finished.text  # greedy: the grammar changed nothing


def test_a_first_choice_the_grammar_rejects_is_sampled_again_from_what_it_allows(
    model, vocabulary_passes
):
    Reply(model, GREEDY)
    plain = Reply(model, replace(GREEDY, max_tokens=1, logprobs=20))
    first = plain.finished.logprobs[0]
    assert first.token  # the model's greedy first token, in this run
    vocabulary_passes.clear()
    checked = Reply(model, replace(GREEDY, grammar=_not_starting_with(first.token), logprobs=20))
    text = checked.finished.text
    assert text and not text.startswith(first.token)
    assert checked.streamed == text
    choice = checked.choice
    assert choice.grammar_passes >= 1  # the first step's choice was rejected
    n_vocab = model.llm.n_vocab()
    assert vocabulary_passes.count(n_vocab) == choice.sampled + 2 * choice.grammar_passes
    # Greedy under the grammar: the token it took is the most likely of those the grammar
    # allows (log-probabilities are of the logits before the grammar, as before).
    taken = checked.finished.logprobs[0]
    assert not taken.token.startswith(first.token) and taken.logprob < first.logprob
    allowed = [value for token, value, _data in first.top if not token.startswith(first.token)]
    assert allowed and taken.logprob == max(allowed)


def _not_starting_with(prefix: str) -> str:
    """A grammar for any non-empty text that does not begin with `prefix`."""

    def chars(text: str) -> str:
        return "".join(f"\\U{ord(c):08X}" for c in text)

    differ = [f'"{chars(prefix[:k])}" [^{chars(prefix[k])}]' for k in range(1, len(prefix))]
    starts = " | ".join([f"[^{chars(prefix[0])}]", *differ])
    shorter = "".join(f' | "{chars(prefix[:k])}"' for k in range(1, len(prefix)))
    return f"root ::= ({starts}) [^\\x00]*{shorter}"


def test_a_seeded_reply_under_a_schema_follows_it_whole_and_streamed_and_repeats(model):
    grammar = response_grammar({"type": "json_schema", "json_schema": {"schema": PERSON}})
    sampling = SamplingSettings(temperature=0.9, max_tokens=60, seed=7, grammar=grammar)
    prompt = "Here is a person, as JSON:"
    Reply(model, sampling, prompt)
    once, again = Reply(model, sampling, prompt), Reply(model, sampling, prompt)
    assert once.finished.stop_reason == "stop"
    person = json.loads(once.finished.text)
    assert set(person) == {"name", "age"} and isinstance(person["age"], int)
    assert once.streamed == once.finished.text
    assert again.finished.text == once.finished.text  # the same seed, the same draws
    assert once.choice.grammar_passes < once.choice.sampled


def test_a_cancel_stops_a_reply_under_a_grammar(model):
    flag = CancelFlag()
    grammar = response_grammar({"type": "json_object"})
    sampling = replace(GREEDY, grammar=grammar, max_tokens=40)
    cut = Reply(model, sampling, flag=flag, on_token=lambda _token: flag.set())
    assert cut.finished.stop_reason == "cancelled"
    assert cut.finished.generated_tokens == cut.choice.sampled < 40
    assert cut.streamed == cut.finished.text


def test_a_bias_that_bans_every_token_the_grammar_allows_fails_the_reply(model):
    """Banning, one reply at a time, each token a one-character grammar picks leaves it none
    to pick: the reply fails with a sentence (the engine goes on), where a token the grammar
    forbids, accepted into it, would abort the process."""
    banned: list[int] = []
    sampling = replace(GREEDY, grammar='root ::= "7"')
    for _round in range(8):
        bias = tuple((token, -100.0) for token in banned)
        try:
            reply = Reply(model, replace(sampling, logit_bias=bias))
        except LogitBiasError as refused:
            assert "bans every token the grammar" in str(refused)
            break
        assert reply.finished.text == "7"
        banned.append(reply.choice.tokens[0])
    else:
        raise AssertionError(f"every round found a token for '7' after banning {banned}")
    assert Reply(model, sampling).finished.text == "7"
