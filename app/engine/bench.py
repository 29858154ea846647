"""Speed at a context depth, measured in the engine process (the worker dispatches
`Bench` here), the way llama-bench measures `pp N @ dD` and `tg N @ dD`:

1. warm up (first kernels, graph capture), then clear the cache;
2. fill the context with `depth` tokens (timed separately, not part of the speeds);
3. one prompt of `n_prompt` tokens at positions depth.. (batches of n_batch, logits for
   each batch's last token only), synchronized, timed, then removed again -> prompt tokens/s;
4. `n_gen` single-token decodes from `depth`, each synchronized, timed -> decode tokens/s.
Steps 3 and 4 are repeated `repetitions` times and the median repetition is reported.

Tokens are random ids (as llama-bench's): speed does not depend on what they say.
"""

from __future__ import annotations

import logging
import random
import statistics
import time
from typing import TYPE_CHECKING

from app.engine.cancel import CancelCheck
from app.engine.messages import Bench, BenchDone
from app.engine.quality import clear_cache, decode_batch
from app.platform.errors import BadInputError, EngineFailedError

if TYPE_CHECKING:
    from llama_cpp import Llama

log = logging.getLogger(__name__)


def synchronize(llm: Llama) -> None:
    import llama_cpp

    # GPU backends return from llama_decode before the work is done.
    llama_cpp.llama_synchronize(llm._ctx.ctx)


def decode_span(llm: Llama, tokens: list[int], start_pos: int, cancel: CancelCheck | None) -> None:
    for i in range(0, len(tokens), llm.n_batch):
        if cancel is not None and cancel.is_set():
            raise EngineFailedError("The benchmark was cancelled.")
        decode_batch(llm, tokens[i : i + llm.n_batch], start_pos + i, "last")


def run_bench(llm: Llama, command: Bench, cancel: CancelCheck | None = None) -> BenchDone:
    """Run the measurement on the loaded `llm`; the cache is empty again afterwards."""
    n_ctx = llm.n_ctx()
    depth, n_prompt, n_gen = command.depth, command.n_prompt, command.n_gen
    if depth < 0 or n_prompt < 1 or n_gen < 1:
        raise BadInputError("Depth must be 0 or more and the prompt and decode counts at least 1.")
    if depth + max(n_prompt, n_gen) > n_ctx:
        raise BadInputError(
            f"Depth {depth} plus {max(n_prompt, n_gen)} measured tokens does not fit the "
            f"{n_ctx}-token context; choose a smaller depth."
        )
    reps = max(1, command.repetitions)
    rng = random.Random(command.seed)
    n_vocab = llm.n_vocab()

    def random_tokens(n: int) -> list[int]:
        return [rng.randrange(n_vocab) for _ in range(n)]

    try:
        clear_cache(llm)
        decode_batch(llm, random_tokens(min(llm.n_batch, 64)), 0, "last")
        decode_batch(llm, random_tokens(1), 64, "last")
        synchronize(llm)
        clear_cache(llm)

        start = time.perf_counter()
        decode_span(llm, random_tokens(depth), 0, cancel)
        synchronize(llm)
        fill_seconds = time.perf_counter() - start

        prompt = random_tokens(n_prompt)
        prompt_times = []
        for _ in range(reps):
            start = time.perf_counter()
            decode_span(llm, prompt, depth, cancel)
            synchronize(llm)
            prompt_times.append(time.perf_counter() - start)
            llm._ctx.kv_cache_seq_rm(0, depth, -1)

        token = random_tokens(1)
        decode_times = []
        for _ in range(reps):
            start = time.perf_counter()
            for i in range(n_gen):
                if cancel is not None and cancel.is_set():
                    raise EngineFailedError("The benchmark was cancelled.")
                decode_batch(llm, token, depth + i, "last")
                synchronize(llm)
            decode_times.append(time.perf_counter() - start)
            llm._ctx.kv_cache_seq_rm(0, depth, -1)
    finally:
        clear_cache(llm)
    # The median repetition: one burst of another process's work does not decide it.
    prompt_seconds = statistics.median(prompt_times)
    decode_seconds = statistics.median(decode_times)

    log.info(
        "bench depth %d: pp%d %.1f t/s, tg%d %.1f t/s",
        depth,
        n_prompt,
        n_prompt / prompt_seconds,
        n_gen,
        n_gen / decode_seconds,
    )
    return BenchDone(
        request_id=command.request_id,
        depth=depth,
        n_prompt=n_prompt,
        n_gen=n_gen,
        fill_seconds=fill_seconds,
        prompt_seconds=prompt_seconds,
        decode_seconds=decode_seconds,
        repetitions=reps,
        prompt_total_seconds=sum(prompt_times),
        decode_total_seconds=sum(decode_times),
        decode_seconds_each=tuple(decode_times),
        prompt_tokens_per_second=n_prompt / prompt_seconds,
        decode_tokens_per_second=n_gen / decode_seconds,
    )
