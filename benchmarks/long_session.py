"""The soak: load, reply and unload a model many times in ONE app session (the real window,
EngineClient and engine process), then 200 conversations, one of 5,000 messages, in the same
session (benchmarks/long_conversations.py).

    QT_QPA_PLATFORM=offscreen nice python benchmarks/long_session.py \\
        [--cycles 50] [--model tiny|starter|PATH] [--tokens 32] [--no-record] [--json PATH]

--model tiny (the default) is the few-MB random-weight Llama of app/core/random_model.py: the
app, the engine and llama.cpp do all their work, the weights are just small. Cycles follow
the events (model_loaded, reply_finished, model_unloaded; tests/session_cycles.py), never
a clock. After the first and the last cycle it reads the GUI's and the engine's resident
memory, open file descriptors and threads (psutil).

Targets: memory of each process after the last cycle at most 5% over after the first (also
shown from cycle 5, after the caches and the allocator have warmed up); open
files and threads not grown; every conversation opens in under 300 ms and scrolling stays
fluid. Exit 1 when one is missed. What met its target is merged into docs/reliability.json
(Long sessions) and docs/reliability.md is rendered again (tests/reliability_record.py: one
renderer for the tests and this); --no-record leaves them alone.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

MEMORY_GROWTH = 0.05
# Also measured from here: the first cycles fill caches and the allocator's free lists once
# (GUI, tiny model: glibc held ~3 MiB free after cycle 1 and ~13 MiB from cycle 5 on, in-use
# memory barely moving), so growth after them is what a long session keeps adding.
WARM_CYCLE = 5
AREA = "Long sessions"


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def _cycles(parts, model_path: str, cycles: int, tokens: int) -> list:
    from PySide6.QtCore import QEventLoop

    from tests.session_cycles import LoadCycles

    done: list = []
    failures: list[str] = []
    loop = QEventLoop()
    driver = LoadCycles(parts, model_path, cycles, max_tokens=tokens)

    def on_cycle(cycle) -> None:
        done.append(cycle)
        if cycle.number in (1, cycles) or cycle.number % 10 == 0:
            print(
                f"cycle {cycle.number:3d}: {cycle.generated_tokens} tokens; GUI "
                f"{_mib(cycle.gui.rss)}, {cycle.gui.fds} fds, {cycle.gui.threads} threads; "
                f"engine {_mib(cycle.engine.rss)}, {cycle.engine.fds} fds, "
                f"{cycle.engine.threads} threads",
                flush=True,
            )

    driver.cycle_finished.connect(on_cycle)
    driver.finished.connect(loop.quit)
    driver.failed.connect(failures.append)
    driver.failed.connect(lambda _m: loop.quit())
    driver.start()
    loop.exec()
    if failures:
        raise SystemExit(f"the soak stopped: {failures[0]}")
    return done


def soak_facts(cycles: list, model_name: str) -> dict[str, tuple[str, bool]]:
    """What the soak measured, as (value, whether it met its target)."""
    first, last = cycles[0], cycles[-1]
    facts: dict[str, tuple[str, bool]] = {
        "soak (benchmarks/long_session.py): load-reply-unload cycles in one app session": (
            f"{len(cycles)} ({model_name}; one engine process: "
            f"{'yes' if len({c.engine_pid for c in cycles}) == 1 else 'no'})",
            len({c.engine_pid for c in cycles}) == 1,
        )
    }
    for name, label in (("gui", "GUI"), ("engine", "engine")):
        before, after = getattr(first, name), getattr(last, name)
        growth = after.rss / before.rss - 1
        facts[f"soak: {label} memory after cycle 1 -> {last.number} (target <= +5%)"] = (
            f"{_mib(before.rss)} -> {_mib(after.rss)} ({growth:+.1%})",
            growth <= MEMORY_GROWTH,
        )
        if last.number > WARM_CYCLE:
            warm = getattr(cycles[WARM_CYCLE - 1], name)
            growth = after.rss / warm.rss - 1
            facts[
                f"soak: {label} memory after warm-up cycle {WARM_CYCLE} -> {last.number} "
                "(target <= +5%)"
            ] = (
                f"{_mib(warm.rss)} -> {_mib(after.rss)} ({growth:+.1%})",
                growth <= MEMORY_GROWTH,
            )
        facts[f"soak: {label} open files / threads after cycle 1 -> {last.number}"] = (
            f"{before.fds} / {before.threads} -> {after.fds} / {after.threads}",
            after.fds <= before.fds and after.threads <= before.threads,
        )
    return facts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=50)
    parser.add_argument("--model", default="tiny", help="tiny (random weights), starter, a path")
    parser.add_argument("--tokens", type=int, default=32, help="tokens per reply at most")
    parser.add_argument("--no-record", action="store_true", help="leave docs/reliability.* alone")
    parser.add_argument("--json", type=Path, help="write every measurement here too")
    args = parser.parse_args(argv)

    import long_conversations
    from PySide6.QtWidgets import QApplication

    from app.core.model_ref import resolve_model
    from app.core.random_model import write_model
    from app.core.settings import SettingsFile
    from app.gui import build_app
    from tests.reliability_record import save_facts

    _app = QApplication.instance() or QApplication([])  # must outlive the run
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kvstudio-soak-") as tmp:
        folder = Path(tmp)
        if args.model == "tiny":
            model = write_model(folder / "tiny-llama.gguf", 2, "small", None)
            model_name = "tiny random-weight Llama"
        else:
            model = resolve_model(args.model)
            model_name = model.name
        SettingsFile(folder).update(n_ctx=2048, n_threads=2)
        parts = build_app(folder)
        parts.window.resize(1280, 860)
        parts.window.show()
        cycles = _cycles(parts, str(model), args.cycles, args.tokens)
        soak_s = time.perf_counter() - started
        conversations = long_conversations.measure(parts)
        parts.window.close()
        parts.close()

    facts = soak_facts(cycles, model_name) | conversations.facts()
    print(f"\n{len(cycles)} cycles in {soak_s:.0f} s; {os.cpu_count()} CPUs")
    for what, (value, ok) in facts.items():
        print(f"{what}: {value}  {'OK' if ok else 'MISSED'}")
    print(long_conversations.report(conversations).splitlines()[-1])
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "cycles": [
                        {
                            "number": c.number,
                            "gui": vars(c.gui),
                            "engine": vars(c.engine),
                            "tokens": c.generated_tokens,
                        }
                        for c in cycles
                    ],
                    "open_ms": conversations.open_ms,
                    "step_ms": conversations.step_ms,
                },
                indent=1,
            )
        )
    if not args.no_record:  # the page only shows what held
        save_facts({AREA: {what: value for what, (value, ok) in facts.items() if ok}})
    return 0 if all(ok for _value, ok in facts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
