"""Decode speed through KV Studio's engine process vs a bare llama-cpp-python loop.

Same model, same settings, one run, interleaved A B A B so machine noise hits both.
Both sides are timed the way a user sees them: from the first streamed token to the
last (the first token is prompt processing, so it is excluded), greedy sampling.

    python benchmarks/decode_speed.py [--model starter] [--tokens 128] [--rounds 4]

Prints each round and the ratio engine/bare of the medians (target >= 0.97).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROMPT = "Here is a long story about a lighthouse keeper and the sea. Once upon a time,"


def bare_round(llm, prompt: str, n_tokens: int) -> tuple[float, int]:
    """(decode tokens/s, tokens) of a plain llm.generate loop, as its docs show it."""
    import llama_cpp

    tokens = llm.tokenize(prompt.encode(), add_bos=True)
    vocab = llm._model.vocab
    pieces = []
    count = 0
    first = last = 0.0
    for token in llm.generate(
        tokens, top_k=40, top_p=0.95, min_p=0.05, temp=0.0, repeat_penalty=1.0
    ):
        last = time.perf_counter()
        if not first:
            first = last
        if llama_cpp.llama_vocab_is_eog(vocab, token):
            break
        count += 1
        pieces.append(llm.detokenize([token]))
        if count >= n_tokens:
            break
    return (count - 1) / (last - first), count


def engine_round(proc, prompt: str, n_tokens: int) -> tuple[float, int]:
    """(decode tokens/s, tokens) seen by the client of EngineProcess."""
    from app.engine.messages import Failed, Finished, Generate, SamplingSettings, Token

    sampling = SamplingSettings(
        temperature=0.0, top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.0, max_tokens=n_tokens
    )
    proc.send(Generate("bench", sampling, prompt=prompt))
    first = 0.0
    while True:
        event = proc.recv(timeout=600)
        now = time.perf_counter()
        if isinstance(event, Token) and not first:
            first = now
        elif isinstance(event, Finished):
            return (event.generated_tokens - 1) / (now - first), event.generated_tokens
        elif isinstance(event, Failed):
            raise SystemExit(f"engine failed: {event.message}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="starter")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--ctx", type=int, default=2048)
    parser.add_argument("--kv", default="q8_0/f16")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--gpu-layers", type=int, default=-1)
    args = parser.parse_args()

    import llama_cpp  # before numpy (docs/llama-cpp-notes.md: the import-order trap)

    from app.engine.loader import weights_repacked
    from app.engine.messages import Load, Loaded
    from app.engine.process import EngineProcess
    from app.kv.kv_types import KvMode
    from app.load.profile import LoadProfile
    from app.models.model_ref import resolve_model

    path = resolve_model(args.model)
    mode = KvMode.parse(args.kv)
    options = LoadProfile(
        model_path=str(path),
        n_ctx=args.ctx,
        n_gpu_layers=args.gpu_layers,
        kv=mode,
        n_threads=args.threads,
        seed=1,
    )
    quiet = llama_cpp.llama_log_callback(lambda *_: None)  # must outlive every llama.cpp call
    llama_cpp.llama_log_set(quiet, None)
    kwargs = {
        "n_ctx": args.ctx,
        "n_gpu_layers": args.gpu_layers,
        "flash_attn": True,
        "type_k": mode.k.ggml_id,
        "type_v": mode.v.ggml_id,
        "swa_full": False,
        "seed": 1,
        "verbose": False,
    }
    if args.threads:
        kwargs.update(n_threads=args.threads, n_threads_batch=args.threads)
    with weights_repacked(False):  # as the engine loads (app/engine/loader.py says why)
        llm = llama_cpp.Llama(str(path), **kwargs)

    proc = EngineProcess()
    proc.send(Load(options))
    loaded = proc.recv(timeout=600)
    if not isinstance(loaded, Loaded):
        raise SystemExit(f"engine did not load: {loaded}")
    print(f"model {path.name}, KV {mode.label}, n_ctx {args.ctx}, {args.tokens} tokens, greedy")
    # One warm-up each: first runs page the weights in and start the thread pools.
    bare_round(llm, PROMPT, 16)
    engine_round(proc, PROMPT, 16)
    bare, engine = [], []
    try:
        for i in range(args.rounds):
            speed, n = bare_round(llm, PROMPT, args.tokens)
            bare.append(speed)
            print(f"round {i + 1}  bare   {speed:7.2f} t/s ({n} tokens)")
            time.sleep(0.3)  # let the other side's OpenMP threads stop spinning
            speed, n = engine_round(proc, PROMPT, args.tokens)
            engine.append(speed)
            print(f"round {i + 1}  engine {speed:7.2f} t/s ({n} tokens)")
            time.sleep(0.3)
    finally:
        proc.stop()
        llm.close()
    ratio = statistics.median(engine) / statistics.median(bare)
    print(
        f"median bare {statistics.median(bare):.2f} t/s, engine {statistics.median(engine):.2f} t/s"
    )
    print(f"ratio engine/bare = {ratio:.3f} (target >= 0.97)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
