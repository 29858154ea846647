"""The GUI thread's longest stall while the dashboard samples memory at 10 Hz and a reply
streams from the real engine, measured with a QTimer heartbeat on the GUI thread.

A 5 ms heartbeat timer records the gaps between its ticks; a stall is how much longer
than 5 ms a gap was. Two phases, same engine and prompt: with the Dashboard page shown
(sampling + 10 Hz redraws + token signals), and with the dashboard stopped (tokens only),
so the cost of the dashboard itself is visible side by side.

    QT_QPA_PLATFORM=offscreen python benchmarks/gui_stall.py \\
        [--model starter] [--tokens 256] [--rounds 2] [--busy 1]

Target: the longest stall with the dashboard under 50 ms, with `--busy` other processes
(default 1) spinning on the CPU the whole time, as a user's machine has other work.

A watchdog thread samples the GUI thread's Python stack (sys._current_frames) whenever a
heartbeat is more than 20 ms late, and prints where the GUI thread was during stalls, so a
regression names its cause.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

HEARTBEAT_MS = 5
TARGET_MS = 50.0
LATE_MS = 20.0  # the watchdog looks at the GUI thread's stack once a beat is this late


class StallWatchdog:
    """Samples the GUI thread's stack while its heartbeat is late (every 5 ms)."""

    def __init__(self, heartbeat: Heartbeat) -> None:
        self.heartbeat = heartbeat
        self.gui_thread = threading.get_ident()
        self.phase = ""  # set by the GUI thread; samples are counted per phase
        self.sites: dict[str, collections.Counter[str]] = collections.defaultdict(
            collections.Counter
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stall-watchdog", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            late = (time.perf_counter() - self.heartbeat.last) * 1000 - HEARTBEAT_MS
            if late < LATE_MS or not self.heartbeat.timer_running:
                continue
            frame = sys._current_frames().get(self.gui_thread)
            if frame is None:
                continue
            stack = traceback.extract_stack(frame)[-6:]
            project = [f for f in stack if "/app/" in f.filename or "pyqtgraph" in f.filename]
            where = project or stack
            self.sites[self.phase][
                "  <  ".join(
                    f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(where[-3:])
                )
            ] += 1

    def report(self, phase: str, top: int = 6) -> str:
        sites = self.sites.get(phase)
        if not sites:
            return f"watchdog ({phase}): no heartbeat was {LATE_MS:.0f} ms late"
        header = (
            f"watchdog ({phase}): where the GUI thread was while a heartbeat was "
            f">{LATE_MS:.0f} ms late ({sum(sites.values())} samples, 5 ms apart; the event "
            "loop's own wait means the thread was waiting for the CPU or the GIL):"
        )
        lines = [header]
        lines += [f"  {n:4d}  {site}" for site, n in sites.most_common(top)]
        return "\n".join(lines)


class Heartbeat:
    def __init__(self) -> None:
        from PySide6.QtCore import Qt, QTimer

        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(HEARTBEAT_MS)
        self.timer.timeout.connect(self._tick)
        self.gaps: list[float] = []
        self.last = 0.0  # read by the watchdog thread (a float assignment is atomic)
        self.timer_running = False
        # Per late beat: (stall ms, ms the GUI thread ran, ms it waited for a CPU); the rest
        # of the stall it slept, which inside a busy event loop means waiting for the GIL.
        self.late: list[tuple[float, float, float]] = []
        self._sched: tuple[int, int] | None = None

    def start(self) -> None:
        self.gaps = []
        self._sched = _schedstat()
        self.last = time.perf_counter()
        self.timer_running = True
        self.timer.start()

    def stop(self) -> list[float]:
        self.timer.stop()
        self.timer_running = False
        return [max(0.0, g - HEARTBEAT_MS) for g in self.gaps]

    def _tick(self) -> None:
        now = time.perf_counter()
        gap = (now - self.last) * 1000
        self.gaps.append(gap)
        self.last = now
        sched = _schedstat()
        if sched is not None and self._sched is not None and gap - HEARTBEAT_MS > LATE_MS:
            ran, waited = (sched[0] - self._sched[0]) / 1e6, (sched[1] - self._sched[1]) / 1e6
            self.late.append((gap - HEARTBEAT_MS, ran, waited))
        self._sched = sched


def _schedstat() -> tuple[int, int] | None:
    """This thread's time on a CPU and time runnable but waiting for one (ns, Linux)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            ran, waited, _ = f.read().split()
        return int(ran), int(waited)
    except OSError:
        return None


def stream_once(client, n_tokens: int, seed: int, beat: Heartbeat) -> tuple[list[float], int]:
    """Stream one reply with the heartbeat running; (stalls in ms, tokens)."""
    from PySide6.QtCore import QEventLoop, QTimer

    from app.engine.messages import Generate, SamplingSettings

    loop = QEventLoop()
    done: dict = {}

    def finished(event) -> None:
        done["event"] = event
        loop.quit()

    client.reply_finished.connect(finished)
    client.reply_failed.connect(loop.quit)
    beat.start()
    client.generate(
        Generate(
            f"stall-{seed}",
            SamplingSettings(max_tokens=n_tokens, temperature=0.8, seed=seed),
            prompt="Once upon a time, in a lighthouse by the sea,",
        )
    )
    QTimer.singleShot(600_000, loop.quit)
    loop.exec()
    stalls = beat.stop()
    client.reply_finished.disconnect(finished)
    client.reply_failed.disconnect(loop.quit)
    event = done.get("event")
    return stalls, event.generated_tokens if event else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="starter")
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument("--busy", type=int, default=1, help="busy-loop processes during the run")
    parser.add_argument(
        "--earlier-replies",
        type=int,
        default=60,
        help="markers of this many earlier replies in the live recording, as in a "
        "session that has run a while (the chart's work grew with them)",
    )
    args = parser.parse_args(argv)
    # Another program: its own session, as a compile started in a terminal would be.
    busy = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        for _ in range(args.busy)
    ]
    try:
        return _measure(args)
    finally:
        for process in busy:
            process.kill()
            process.wait()


def _measure(args: argparse.Namespace) -> int:
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication

    from app.load.profile import LoadProfile
    from app.models.model_ref import resolve_model
    from app.services.engine_client import EngineClient
    from app.ui.dashboard.page import DashboardPage

    _app = QApplication.instance() or QApplication([])  # must outlive the run
    client = EngineClient()
    page = DashboardPage(client)
    page.resize(1280, 1400)
    page.show()

    loop = QEventLoop()
    client.model_loaded.connect(lambda _e: loop.quit())
    client.load_failed.connect(lambda _m: loop.quit())
    client.load(LoadProfile(str(resolve_model(args.model)), n_ctx=args.ctx))
    QTimer.singleShot(300_000, loop.quit)
    loop.exec()
    if client.loaded is None:
        print("the model did not load", file=sys.stderr)
        return 1

    recording = page.sampler.recording
    for i in range(args.earlier_replies, 0, -1):  # one reply a second, before the measured ones
        for offset, kind in ((0.0, "prompt"), (0.3, "generation"), (0.8, "finished")):
            recording.mark(kind, kind, t=recording.now() - i + offset)
    page.set_source("live")  # draws those markers now: the session drew them as they came
    # Let the page settle (the load's layout and repaint were still queued when the load's
    # event loop quit): that one-time relayout after a load is not a stall while sampling.
    for _ in range(5):
        QApplication.processEvents()
    beat = Heartbeat()
    watchdog = StallWatchdog(beat)
    watchdog.start()
    results: dict[str, list[float]] = {"dashboard": [], "no dashboard": []}
    tokens = {"dashboard": 0, "no dashboard": 0}
    late: dict[str, list[tuple[float, float, float]]] = {"dashboard": [], "no dashboard": []}
    for round_ in range(args.rounds):
        for phase in ("dashboard", "no dashboard"):
            if phase == "dashboard":
                page.redraw_timer.start()
                page.sampler.start(client.engine_pid)
            else:
                page.redraw_timer.stop()
                page.sampler.stop()
            watchdog.phase = phase
            stalls, n = stream_once(client, args.tokens, seed=round_, beat=beat)
            late[phase].extend(beat.late)
            beat.late = []
            results[phase].extend(stalls)
            tokens[phase] += n
            print(
                f"round {round_ + 1} {phase:>12}: {n} tokens, "
                f"longest stall {max(stalls, default=0):.1f} ms"
            )

    print()
    for phase, stalls in results.items():
        stalls = sorted(stalls) or [0.0]
        p99 = stalls[int(0.99 * (len(stalls) - 1))]
        print(
            f"{phase:>12}: {tokens[phase]} tokens, {len(stalls)} heartbeats, longest stall "
            f"{stalls[-1]:.1f} ms, p99 {p99:.1f} ms, median {statistics.median(stalls):.2f} ms"
        )
        print(watchdog.report(phase))
        worst = sorted(late[phase], reverse=True)[:5]
        if worst:
            print(
                "  longest stalls: ms stalled = ran on a CPU + waited for a CPU "
                "+ slept (GIL or idle):"
            )
            for stall, ran, waited in worst:
                slept = max(0.0, stall - ran - waited)
                print(f"    {stall:6.1f} = {ran:5.1f} + {waited:5.1f} + {slept:5.1f}")
    watchdog.stop()
    longest = max(results["dashboard"], default=0.0)
    baseline = max(results["no dashboard"], default=0.0)
    print(
        f"longest GUI stall with the dashboard sampling at 10 Hz: {longest:.1f} ms "
        f"(target < {TARGET_MS:.0f} ms: {'OK' if longest < TARGET_MS else 'MISSED'}); "
        f"without it: {baseline:.1f} ms"
    )
    # What one frame costs on its own: under CPU contention (another process on every
    # core) stalls also include time the GUI thread simply was not scheduled.
    page.redraw_timer.stop()
    start = time.perf_counter()
    for _ in range(5):
        page.memory_chart.grab()
    chart_ms = (time.perf_counter() - start) / 5 * 1000
    start = time.perf_counter()
    page.content.grab()
    page_ms = (time.perf_counter() - start) * 1000
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    print(
        f"full repaint: memory chart {chart_ms:.1f} ms, whole page {page_ms:.1f} ms; "
        f"{os.cpu_count()} CPUs, {args.busy} busy-loop process(es), load average {load:.1f}"
    )
    page.shutdown()
    client.shutdown()
    return 0 if longest < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
