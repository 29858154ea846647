"""Render the Dashboard page offscreen to a PNG (for docs/screenshots).

# after a real run here: load the model, stream a reply, run a small comparison
QT_QPA_PLATFORM=offscreen python scripts/render_dashboard.py --live docs/screenshots/dashboard.png
# from a recording saved by `kvstudio bench --record` (e.g. the NVML run on a GPU)
QT_QPA_PLATFORM=offscreen python scripts/render_dashboard.py --recording run.json out.png
# what a window shows without scrolling, at each size: /tmp/d-1024x640.png, /tmp/d-1280x800.png
QT_QPA_PLATFORM=offscreen python scripts/render_dashboard.py --live /tmp/d.png \
    --visible 1024x640,1280x800
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def _wait(app, predicate, timeout_s: float) -> None:
    from PySide6.QtCore import QDeadlineTimer, QEventLoop

    deadline = QDeadlineTimer(int(timeout_s * 1000))
    while not predicate():
        if deadline.hasExpired():
            raise TimeoutError("timed out waiting for the engine")
        app.processEvents(QEventLoop.ProcessEventsFlag.WaitForMoreEvents, 50)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--live", action="store_true", help="run the starter model (or --model) first"
    )
    source.add_argument("--recording", type=Path, help="a recording JSON to show")
    parser.add_argument("--model", default="starter")
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=1500)
    parser.add_argument(
        "--visible",
        default="",
        help="sizes WxH,WxH: save what the page shows at each without scrolling (OUT-WxH.png)",
    )
    args = parser.parse_args(argv)

    from PySide6.QtWidgets import QApplication

    from app.engine.messages import Generate, SamplingSettings
    from app.load.profile import LoadProfile
    from app.models.model_ref import resolve_model
    from app.services.engine_client import EngineClient
    from app.ui.dashboard.page import DashboardPage

    app = QApplication.instance() or QApplication([])
    client = EngineClient()
    page = DashboardPage(client)
    page.resize(args.width, args.height)
    page.show()
    try:
        if args.recording is not None:
            page.open_recording(args.recording)
        else:
            from app.engine.quality import default_reference_text

            model = resolve_model(args.model)
            # The comparison first, then a fresh live recording: load, a long prompt, a reply.
            finished: list = []
            page.runner.finished.connect(finished.append)
            page.runner.failed.connect(finished.append)
            page.start_compare(
                model_path=str(model),
                n_ctx=2048,
                depth=512,
                quality_chunks=2,
                n_prompt=256,
                n_gen=32,
            )
            _wait(app, lambda: bool(finished), 900)
            page.sampler.new_recording()
            page.set_source("live")
            client.load(LoadProfile(str(model), n_ctx=args.ctx))
            _wait(app, lambda: client.loaded is not None, 300)
            done: list = []
            client.reply_finished.connect(done.append)
            prompt = default_reference_text()[20000:23000]
            client.generate(
                Generate(
                    "shot", SamplingSettings(max_tokens=300, temperature=0.8, seed=7), prompt=prompt
                )
            )
            _wait(app, lambda: bool(done), 300)
            page._redraw(force_text=True)
        for _ in range(20):
            app.processEvents()
        page._redraw()
        page.kv_panel.set_tokens(page._n_past)
        app.processEvents()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        if not args.visible:
            page.content.grab().save(str(args.out))
            print(f"wrote {args.out}")
        for size in filter(None, args.visible.split(",")):
            # The page's size at this window size: the sidebar and status bar take the rest.
            width, height = (int(x) for x in size.split("x"))
            page.resize(width - 104, height - 27)
            for _ in range(10):
                app.processEvents()
            page._redraw(force_text=True)
            app.processEvents()
            out = args.out.with_name(f"{args.out.stem}-{size}{args.out.suffix}")
            page.grab().save(str(out))
            print(f"wrote {out}")
    finally:
        page.shutdown()
        client.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
