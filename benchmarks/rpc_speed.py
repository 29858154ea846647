"""Decode speed of the model split across two loopback workers vs the whole model in one engine
process, and the bytes that cross the network per generated token.

One run, two engines loaded side by side on the chosen backend package (it must have
rpc-server: `kvstudio backend use cpu`), rounds interleaved A B A B so machine noise hits both:
  local  LoadProfile as `kvstudio run` makes them, every layer in the engine process;
  split  the same with rpc_workers: two `kvstudio worker` processes on 127.0.0.1, started here.
Decode tokens/s is timed from the first token to the last (the first is prompt processing);
the ratio split/local is taken per pair of rounds. Bytes per token: what the two rpc-servers
sent and received on their connections (the kernel's TCP counters, read with `ss -ti`)
between the first and the last token, over the tokens in between; the loopback interface's
counter (/proc/net/dev, lo, received) over the same span is printed too, as a cross-check
that also sees anything else on this machine.

    KVSTUDIO_DATA_DIR=... python benchmarks/rpc_speed.py [--tokens 64] [--rounds 4] [--ctx 1024]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.load.rpc_workers import free_port_pair  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "Here is a long story about a lighthouse keeper and the sea. Once upon a time,"


def start_worker(port: int) -> subprocess.Popen[str]:
    """`kvstudio worker --port PORT`, returned once it says it listens."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "app", "worker", "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert worker.stdout is not None
    for line in worker.stdout:
        if line.startswith("Stop it with Ctrl-C"):
            return worker
    raise SystemExit(f"the worker on port {port} did not start (exit {worker.wait()})")


def server_bytes(ports: list[int]) -> tuple[int, int]:
    """(bytes the workers sent, bytes they received) so far on their connections, from the
    kernel's TCP counters (`ss -ti`: bytes_sent, bytes_received per socket)."""
    sent = received = 0
    for port in ports:
        out = subprocess.run(
            ["ss", "-tinH", "state", "established", f"( sport = :{port} )"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        sent += sum(int(n) for n in re.findall(r"\bbytes_sent:(\d+)", out))
        received += sum(int(n) for n in re.findall(r"\bbytes_received:(\d+)", out))
    return sent, received


def loopback_bytes() -> int:
    """Bytes the loopback interface carried (received; on lo each byte is also 'sent')."""
    for line in Path("/proc/net/dev").read_text().splitlines():
        name, _, counters = line.partition(":")
        if name.strip() == "lo":
            return int(counters.split()[0])
    return 0


def one_round(proc, n_tokens: int, counters: Callable[[], tuple[int, int, int]]):
    """(decode tokens/s, tokens timed, bytes the workers sent, received, bytes on lo)."""
    from app.engine.messages import Finished, Generate, SamplingSettings, Token

    sampling = SamplingSettings(temperature=0.0, max_tokens=n_tokens, seed=1)
    proc.send(Generate("bench", sampling, prompt=PROMPT))
    times: list[float] = []
    first = last = (0, 0, 0)
    while True:
        event = proc.recv(timeout=600)
        if isinstance(event, Token):
            times.append(time.perf_counter())
            last = counters()
            if len(times) == 1:
                first = last
        elif isinstance(event, Finished):
            break
    speed = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0
    return speed, len(times) - 1, *(b - a for a, b in zip(first, last, strict=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="starter")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--ctx", type=int, default=1024)
    args = parser.parse_args()

    from app.engine.messages import Load
    from app.engine.process import EngineProcess, until
    from app.load.profile import LoadProfile
    from app.models.model_ref import resolve_model

    path = resolve_model(args.model)
    ports: list[int] = []
    workers = []
    for _ in range(2):  # one after the other: the second pair is free once the first is bound
        ports.append(free_port_pair())
        workers.append(start_worker(ports[-1]))
    addresses = tuple(f"127.0.0.1:{port}" for port in ports)
    local, split = EngineProcess(), EngineProcess()
    try:
        options = LoadProfile(model_path=str(path), n_ctx=args.ctx)
        local.send(Load(options))
        until(local, "Loaded", 600)
        split.send(Load(LoadProfile(model_path=str(path), n_ctx=args.ctx, rpc_workers=addresses)))
        loaded = until(split, "Loaded", 600)
        print(
            f"{path.name}, KV {loaded.options.kv.label}, "
            f"{args.tokens} tokens, {os.cpu_count()} cores, workers {', '.join(addresses)}"
        )

        def counters() -> tuple[int, int, int]:
            return (*server_bytes(ports), loopback_bytes())

        one_round(local, 8, counters)  # warm-up: first-use allocations, the prompt's cache
        one_round(split, 8, counters)
        rows = []
        for n in range(args.rounds):
            a = one_round(local, args.tokens, counters)
            b = one_round(split, args.tokens, counters)
            rows.append((a, b))
            print(
                f"round {n + 1}: local {a[0]:6.2f} tok/s, split {b[0]:6.2f} tok/s "
                f"(ratio {b[0] / a[0]:.3f}); per token the workers sent {b[2] / b[1] / 1024:.1f} "
                f"KiB, received {b[3] / b[1] / 1024:.1f} KiB; lo {b[4] / b[1] / 1024:.1f} KiB"
            )
    finally:
        local.stop()
        split.stop()
        for worker in workers:
            worker.terminate()
            worker.wait(30)
    ratio = statistics.median(b[0] / a[0] for a, b in rows)
    sent = statistics.median(b[2] / b[1] for _, b in rows)
    received = statistics.median(b[3] / b[1] for _, b in rows)
    on_lo = statistics.median(b[4] / b[1] for _, b in rows)
    print(
        f"decode: split {statistics.median(b[0] for _, b in rows):.2f} / local "
        f"{statistics.median(a[0] for a, _ in rows):.2f} tok/s, median ratio per pair {ratio:.3f}"
    )
    print(
        f"bytes per token: the workers sent {sent / 1024:.1f} KiB and received "
        f"{received / 1024:.1f} KiB ({sent + received:.0f} B in all); lo carried "
        f"{on_lo / 1024:.1f} KiB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
