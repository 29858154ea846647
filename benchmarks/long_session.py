"""The soak: load, reply and unload a model many times in ONE app session (the real window,
EngineClient and engine process), then 200 conversations, one of 5,000 messages, in the same
session (benchmarks/long_conversations.py).

    QT_QPA_PLATFORM=offscreen nice python benchmarks/long_session.py \\
        [--cycles 50] [--model tiny|starter|PATH] [--tokens 32] [--no-record] [--json PATH]
        [--trace]

--model tiny (the default) is the few-MB random-weight Llama of app/models/random_model.py: the
app, the engine and llama.cpp do all their work, the weights are just small. Cycles follow
the events (model_loaded, reply_finished, model_unloaded; tests/session_cycles.py), never
a clock. After the first and the last cycle it reads the GUI's and the engine's resident
memory, open file descriptors and threads (psutil).

Targets: memory of each process after cycle 50 (or the last, if fewer) at most 5% over after
the first (also shown from cycle 5, after the caches and the allocator have warmed up); with
--cycles 100 or more, at most +1% per 50 cycles after cycle 50, so it has levelled off; open
files and threads not grown; every conversation opens in under 300 ms and scrolling stays
fluid. Exit 1 when one is missed. What met its target is merged into docs/reliability.json
(Long sessions) and docs/reliability.md is rendered again (tests/reliability_record.py: one
renderer for the tests and this); --no-record leaves them alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

MEMORY_GROWTH = 0.05
TARGET_CYCLES = 50  # the soak: memory after 50 cycles against after the first
LEVEL_GROWTH = 0.01  # after them, per TARGET_CYCLES cycles: caches full, nothing leaking
# Also measured from here: the first cycles fill caches and the allocator's free lists once
# (GUI, tiny model: glibc held ~3 MiB free after cycle 1 and ~13 MiB from cycle 5 on, in-use
# memory barely moving), so growth after them is what a long session keeps adding.
WARM_CYCLE = 5
AREA = "Long sessions"


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def _cycles(parts, model_path: str, cycles: int, tokens: int, trace: bool = False) -> list:
    from PySide6.QtCore import QEventLoop

    from tests.session_cycles import LoadCycles

    tracer = GrowthTrace(parts.window) if trace else None
    done: list = []
    failures: list[str] = []
    loop = QEventLoop()
    driver = LoadCycles(parts, model_path, cycles, max_tokens=tokens)

    def on_cycle(cycle) -> None:
        done.append(cycle)
        if tracer is not None and cycle.number in (WARM_CYCLE, cycles):
            tracer.take(cycle.number)
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
    if tracer is not None:
        print(tracer.report(), flush=True)
        tracer.stop()  # the conversations' timings after the soak are measured without it
    return done


class GrowthTrace:
    """What the GUI process holds more of after the last cycle than after the warm-up cycle:
    Python allocations by line (tracemalloc), live objects by type (gc) and the main window's
    QObject descendants by class."""

    def __init__(self, window, frames: int = 8) -> None:
        import tracemalloc

        self._window = window
        self._taken: list[tuple[int, Path, Counter, Counter]] = []
        tracemalloc.start(frames)

    def take(self, cycle: int) -> None:
        import gc
        import tracemalloc

        from PySide6.QtCore import QObject

        # findChildren first: it makes a Python wrapper for each child that had none, which
        # then live as long as the child; counted after it, they are not counted as growth.
        qobjects = Counter(type(o).__name__ for o in self._window.findChildren(QObject))
        gc.collect()  # what is still referenced, not what waits for the collector
        objects = Counter(type(o).__qualname__ for o in gc.get_objects())
        # Kept on disk until the report: held in memory, the first snapshot's traces would be
        # counted as objects grown by the second census.
        path = Path(tempfile.mkdtemp(prefix="kvstudio-trace-")) / f"cycle-{cycle}.tracemalloc"
        tracemalloc.take_snapshot().dump(str(path))
        self._taken.append((cycle, path, objects, qobjects))

    def stop(self) -> None:
        import tracemalloc

        tracemalloc.stop()
        for _cycle, path, _objects, _qobjects in self._taken:
            shutil.rmtree(path.parent, ignore_errors=True)
        self._taken.clear()

    def report(self, top: int = 15) -> str:
        if len(self._taken) < 2:
            return "trace: fewer than two snapshots"
        import tracemalloc

        (first, path0, obj0, q0), (last, path1, obj1, q1) = self._taken[0], self._taken[-1]
        snap0, snap1 = tracemalloc.Snapshot.load(str(path0)), tracemalloc.Snapshot.load(str(path1))
        lines = [f"\ntrace: growth in the GUI process, cycle {first} -> {last}"]
        stats = snap1.compare_to(snap0, "lineno")
        total = sum(s.size_diff for s in stats)
        lines.append(f"tracemalloc: {total / 2**20:+.2f} MiB in all; top {top} lines:")
        for stat in stats[:top]:
            frame = stat.traceback[0]
            lines.append(
                f"  {stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d} blocks  "
                f"{frame.filename}:{frame.lineno}"
            )
        traces = snap1.compare_to(snap0, "traceback")
        for stat in traces[:3]:
            lines.append(f"  {stat.size_diff / 1024:+9.1f} KiB from:")
            lines.extend(f"      {line}" for line in stat.traceback.format()[-12:])
        for name, before, after in (("gc objects", obj0, obj1), ("QObjects", q0, q1)):
            grown = Counter({k: after[k] - before[k] for k in after | before})
            lines.append(
                f"{name}: {sum(before.values())} -> {sum(after.values())}; grown most: "
                + ", ".join(f"{k} {v:+d}" for k, v in grown.most_common(10) if v)
            )
        return "\n".join(lines)


def soak_facts(cycles: list, model_name: str) -> dict[str, tuple[str, bool]]:
    """What the soak measured, as (value, whether it met its target). The targets are taken
    at cycle TARGET_CYCLES (or the last, if fewer); a longer soak also shows whether memory
    levels off after it."""
    first, last = cycles[0], cycles[-1]
    at = cycles[min(TARGET_CYCLES, len(cycles)) - 1]
    facts: dict[str, tuple[str, bool]] = {
        "soak (benchmarks/long_session.py): load-reply-unload cycles in one app session": (
            f"{len(cycles)} ({model_name}; one engine process: "
            f"{'yes' if len({c.engine_pid for c in cycles}) == 1 else 'no'})",
            len({c.engine_pid for c in cycles}) == 1,
        )
    }
    for name, label in (("gui", "GUI"), ("engine", "engine")):
        before, after = getattr(first, name), getattr(at, name)
        growth = after.rss / before.rss - 1
        facts[f"soak: {label} memory after cycle 1 -> {at.number} (target <= +5%)"] = (
            f"{_mib(before.rss)} -> {_mib(after.rss)} ({growth:+.1%})",
            growth <= MEMORY_GROWTH,
        )
        if at.number > WARM_CYCLE:
            warm = getattr(cycles[WARM_CYCLE - 1], name)
            growth = after.rss / warm.rss - 1
            facts[
                f"soak: {label} memory after warm-up cycle {WARM_CYCLE} -> {at.number} "
                "(target <= +5%)"
            ] = (
                f"{_mib(warm.rss)} -> {_mib(after.rss)} ({growth:+.1%})",
                growth <= MEMORY_GROWTH,
            )
        if last.number >= 2 * at.number:
            end = getattr(last, name)
            per_block = (end.rss / after.rss - 1) * at.number / (last.number - at.number)
            facts[
                f"soak: {label} memory after cycle {at.number} -> {last.number} "
                f"(levels off: target <= +1% per {at.number} cycles)"
            ] = (
                f"{_mib(after.rss)} -> {_mib(end.rss)} ({per_block:+.1%} per {at.number})",
                per_block <= LEVEL_GROWTH,
            )
        end = getattr(last, name)
        facts[f"soak: {label} open files / threads after cycle 1 -> {last.number}"] = (
            f"{before.fds} / {before.threads} -> {end.fds} / {end.threads}",
            end.fds <= before.fds and end.threads <= before.threads,
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
    parser.add_argument(
        "--trace",
        action="store_true",
        help=f"print what the GUI process grew from cycle {WARM_CYCLE} to the last "
        "(tracemalloc by line, gc objects and QObjects by type); memory figures then include "
        "tracemalloc's own",
    )
    args = parser.parse_args(argv)

    import long_conversations
    from PySide6.QtWidgets import QApplication

    from app.gui import build_app
    from app.models.model_ref import resolve_model
    from app.models.random_model import write_model
    from app.state.settings import SettingsFile
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
        cycles = _cycles(parts, str(model), args.cycles, args.tokens, args.trace)
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
