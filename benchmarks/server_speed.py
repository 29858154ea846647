"""Decode speed through the local server vs the app's engine directly, and the time to first
token the server adds.

One engine process, one model, one run; rounds interleaved A B A B so machine noise hits both:
  direct  Generate sent to the EngineProcess, Token events read from its pipe (what the app's
          chat gets);
  server  the same request as a streamed POST /v1/completions to `kvstudio serve`'s server
          (ProcessGateway + LocalServer, here on a thread), read as server-sent events by a
          plain HTTP client (http.client), so the client library's own cost is left out.
Both are timed where the text arrives: decode tokens/s from the first piece to the last (the
first is prompt processing), time to first token from the request to the first piece.

    python benchmarks/server_speed.py [--model starter] [--tokens 128] [--rounds 4]

Prints each round, the ratio server/direct of the median decode speeds (target >= 0.95) and
the median time to first token the server adds (target < 20 ms).
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROMPT = "Here is a long story about a lighthouse keeper and the sea. Once upon a time,"


def direct_round(proc, n_tokens: int) -> tuple[float, float, int]:
    """(decode tokens/s, seconds to first token, pieces) reading the engine's events."""
    from app.engine.messages import Finished, Generate, SamplingSettings, Token

    sampling = SamplingSettings(temperature=0.0, max_tokens=n_tokens, seed=1)
    sent = time.perf_counter()
    proc.send(Generate("direct", sampling, prompt=PROMPT))
    times = []
    while True:
        event = proc.recv(timeout=600)
        if isinstance(event, Token):
            times.append(time.perf_counter())
        elif isinstance(event, Finished):
            return _speed(times), times[0] - sent, len(times)


def server_round(base_url: str, n_tokens: int) -> tuple[float, float, int]:
    """The same, as a streamed completion through the server's HTTP API."""
    url = urlparse(base_url)
    connection = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=600)
    body = json.dumps(
        {
            "model": "any",
            "prompt": PROMPT,
            "max_tokens": n_tokens,
            "temperature": 0,
            "seed": 1,
            "stream": True,
        }
    )
    sent = time.perf_counter()
    connection.request(
        "POST", f"{url.path}/completions", body, {"Content-Type": "application/json"}
    )
    response = connection.getresponse()
    times = []
    for line in response:
        if line.startswith(b"data: {"):
            chunk = json.loads(line[6:])
            if chunk["choices"] and chunk["choices"][0]["text"]:
                times.append(time.perf_counter())
        elif line.startswith(b"data: [DONE]"):
            break
    connection.close()
    return _speed(times), times[0] - sent, len(times)


def _speed(times: list[float]) -> float:
    return (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="starter")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--ctx", type=int, default=2048)
    args = parser.parse_args()

    from app.engine.messages import Load
    from app.engine.process import EngineProcess, until
    from app.load.profile import LoadProfile
    from app.models.model_ref import resolve_model
    from app.server.options import ServerOptions
    from app.server.process_gateway import ProcessGateway
    from app.server.server_runner import LocalServer

    path = resolve_model(args.model)
    proc = EngineProcess()
    proc.send(Load(LoadProfile(model_path=str(path), n_ctx=args.ctx)))
    loaded = until(proc, "Loaded", 600)
    print(f"{path.name}, KV {loaded.options.kv.label}, {args.tokens} tokens")
    # The direct rounds read the pipe themselves, so the gateway's thread starts only for the
    # server rounds: one reader of the engine at a time.
    direct, server = [], []
    try:
        direct_round(proc, 8)  # warm-up: the prompt's cache, first-use allocations
        for n in range(args.rounds):
            direct.append(direct_round(proc, args.tokens))
            gateway = ProcessGateway(proc, loaded)
            served = LocalServer(gateway, ServerOptions(port=0))
            served.start()
            try:
                if n == 0:
                    server_round(served.base_url, 8)  # the server's warm-up
                server.append(server_round(served.base_url, args.tokens))
            finally:
                served.stop()
                gateway.close()
            for label, (speed, ttft, pieces) in (("direct", direct[-1]), ("server", server[-1])):
                print(
                    f"round {n + 1} {label:6}: {speed:7.1f} tok/s, first token "
                    f"{ttft * 1000:6.1f} ms, {pieces} pieces"
                )
    finally:
        proc.stop()
    direct_speed = statistics.median(r[0] for r in direct)
    server_speed = statistics.median(r[0] for r in server)
    added = statistics.median(s[1] - d[1] for s, d in zip(server, direct, strict=True))
    print(
        f"decode: server {server_speed:.1f} / direct {direct_speed:.1f} tok/s = "
        f"{server_speed / direct_speed:.3f} (target >= 0.95)"
    )
    print(f"time to first token added by the server: {added * 1000:.1f} ms (target < 20 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
