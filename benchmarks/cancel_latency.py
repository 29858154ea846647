"""Stop latency through KV Studio's engine process: from EngineProcess.cancel() to the
Finished event, as the GUI's Stop button sees it.

Two cases, each cancelled many times:
  mid-reply   cancel after a random number of streamed tokens (the cancel lands inside a
              token decode or between two);
  mid-prompt  cancel a random time into a long prompt that llama.cpp evaluates in one
              llama_decode call (n_batch = the context), which only the abort callback can
              cut short: without it Stop would wait for the rest of the prompt.

    python benchmarks/cancel_latency.py [--model starter] [--cancels 20] [--ctx 2048]

Prints each case's median and max latency, and what the whole prompt costs uncancelled.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REPLY_PROMPT = "Here is a long story about a lighthouse keeper and the sea. Once upon a time,"


def _until(proc, kinds: tuple[type, ...], timeout: float = 600.0):
    """The first event of one of `kinds` (others are dropped)."""
    from app.engine.messages import Failed

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        event = proc.recv(timeout=deadline - time.monotonic())
        if isinstance(event, Failed) and Failed not in kinds:
            raise SystemExit(f"engine failed: {event.message}")
        if isinstance(event, kinds):
            return event
    raise SystemExit(f"no {kinds} within {timeout} s")


def mid_reply(proc, rng: random.Random) -> tuple[float, str]:
    """(seconds from cancel to Finished, stop reason) after 2..30 streamed tokens."""
    from app.engine.messages import Finished, Generate, SamplingSettings, Token

    sampling = SamplingSettings(temperature=0.8, max_tokens=2000, seed=rng.randrange(1 << 30))
    proc.send(Generate("reply", sampling, prompt=REPLY_PROMPT))
    for _ in range(rng.randint(2, 30)):
        _until(proc, (Token,))
    cancelled_at = time.perf_counter()
    proc.cancel()
    finished = _until(proc, (Finished,))
    return time.perf_counter() - cancelled_at, finished.stop_reason


def mid_prompt(proc, prompt: str, delay: float) -> tuple[float, str, int]:
    """(seconds from cancel to Finished, stop reason, tokens generated) when the cancel
    comes `delay` seconds after the prompt's evaluation began (the one-token reply queued
    before it has just finished)."""
    from app.engine.messages import Finished, Generate, SamplingSettings

    proc.send(Generate("before", SamplingSettings(temperature=0.0, max_tokens=1), prompt="Hi"))
    proc.send(Generate("prompt", SamplingSettings(temperature=0.0, max_tokens=64), prompt=prompt))
    _until(proc, (Finished,))
    time.sleep(delay)  # a benchmark may wait; the tests wait on events
    cancelled_at = time.perf_counter()
    proc.cancel()
    finished = _until(proc, (Finished,))
    return time.perf_counter() - cancelled_at, finished.stop_reason, finished.generated_tokens


def _summary(name: str, latencies: list[float]) -> str:
    ms = [x * 1000 for x in latencies]
    return (
        f"{name:<11} n={len(ms):<3} median {statistics.median(ms):7.1f} ms   "
        f"max {max(ms):7.1f} ms   min {min(ms):6.1f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="starter")
    parser.add_argument("--cancels", type=int, default=20, help="cancels per case")
    parser.add_argument("--ctx", type=int, default=2048)
    parser.add_argument("--kv", default="q8_0/f16")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--gpu-layers", type=int, default=-1)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    from app.engine.messages import Finished, Generate, Load, Loaded, SamplingSettings
    from app.engine.process import EngineProcess
    from app.kv.kv_types import KvMode
    from app.load.profile import LoadProfile
    from app.models.model_ref import resolve_model

    path = resolve_model(args.model)
    options = LoadProfile(
        model_path=str(path),
        n_ctx=args.ctx,
        kv=KvMode.parse(args.kv),
        n_threads=args.threads,
        n_gpu_layers=args.gpu_layers,
        n_batch=args.ctx,
        seed=1,
    )
    rng = random.Random(args.seed)
    proc = EngineProcess()
    try:
        proc.send(Load(options))
        loaded = _until(proc, (Loaded,))
        print(
            f"model {path.name}, KV {args.kv}, n_ctx {loaded.n_ctx}, "
            f"n_batch {args.ctx} (a prompt is one decode)"
        )

        # A prompt of about 85% of the context, evaluated whole once to know its cost.
        words = max(8, int(args.ctx * 0.85 / 4.5))
        prompt = " ".join(f"word{i}" for i in range(words))
        proc.send(Generate("whole", SamplingSettings(temperature=0.0, max_tokens=1), prompt=prompt))
        whole = _until(proc, (Finished,))
        prompt_s = whole.time_to_first_token_s
        print(
            f"the whole prompt: {whole.prompt_tokens} tokens in {prompt_s * 1000:.0f} ms "
            f"(without the abort callback, a cancel during it waits for the rest)"
        )

        reply = [mid_reply(proc, rng) for _ in range(args.cancels)]
        prompt_runs = []
        for i in range(args.cancels):
            # Cancel somewhere in the first half of the prompt's evaluation.
            prompt_runs.append(
                mid_prompt(proc, prompt + f" {i}", rng.uniform(0.05, 0.5) * prompt_s)
            )
    finally:
        proc.stop()

    # Only cancels that landed where they were meant to count: a reply still streaming, a
    # prompt still being evaluated (no token yet). A busy machine makes prompts slower or
    # faster than the first measurement, so a few cancels may land after the prompt.
    replies = [r[0] for r in reply if r[1] == "cancelled"]
    prompts = [p[0] for p in prompt_runs if p[1] == "cancelled" and p[2] == 0]
    if replies:
        print(_summary("mid-reply", replies))
    if prompts:
        print(_summary("mid-prompt", prompts))
    missed = len(reply) - len(replies) + len(prompt_runs) - len(prompts)
    if missed:
        print(f"{missed} cancel(s) left out: they landed after the reply or the prompt had ended")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
