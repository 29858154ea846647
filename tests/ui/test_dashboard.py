"""The Dashboard page with the real engine on the starter model, offscreen: the memory
chart updates while a reply streams, markers sit where the engine did the work, the KV
panel follows the context, the int8-K warning banner shows what llama.cpp itself logged
(and nothing about the conversation), and a Compare run fills its table, exports and feeds
the KV advisor's store."""

from __future__ import annotations

import json
import os
import re
import threading

from tests.waits import HANG_GUARD_MS

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from app.engine.messages import ChatMessage, Finished, Generate, SamplingSettings
from app.kv.advisor_store import MeasurementStore, sha256_of_file
from app.load.profile import LoadProfile
from app.platform.errors import BadInputError
from tests.engine_threads import ENGINE_THREADS

pytestmark = pytest.mark.slow
LOAD_MS, REPLY_MS, COMPARE_MS = 120_000, 120_000, 400_000


@pytest.fixture(scope="module")
def dashboard(qapp, starter_model_path):
    from app.services.engine_client import EngineClient
    from app.ui.dashboard.page import DashboardPage

    client = EngineClient()
    page = DashboardPage(client)
    page.resize(1200, 1400)
    page.show()
    yield client, page, starter_model_path
    page.shutdown()
    client.shutdown()
    page.close()
    page.deleteLater()


def test_memory_chart_updates_while_a_reply_streams(qtbot, dashboard):
    client, page, model = dashboard
    with qtbot.waitSignal(client.model_loaded, timeout=LOAD_MS):
        client.load(LoadProfile(str(model), n_ctx=2048, n_threads=ENGINE_THREADS))
    assert "Allocated for 2,048 tokens" in page.kv_panel.alloc_label.text()
    assert "saving" in page.kv_panel.now_label.text()

    chart_sizes: list[int] = []
    client.token_received.connect(lambda _t: chart_sizes.append(page.memory_chart.point_count))
    request = Generate(
        "dash-1",
        SamplingSettings(max_tokens=96, temperature=0.8, seed=3),
        prompt="A short history of the Python programming language:",
    )
    with qtbot.waitSignal(client.reply_finished, timeout=REPLY_MS) as finished:
        client.generate(request)
    # The chart grew while tokens were arriving (redrawn from the sampler's buffer at 10 Hz).
    assert len(chart_sizes) > 10 and chart_sizes[-1] > chart_sizes[0] > 0
    kinds = [m.kind for m in page.sampler.recording.markers]
    for kind in ("load", "loaded", "prompt", "generation", "finished"):
        assert kind in kinds, kinds
    assert kinds.index("prompt") < kinds.index("generation") < kinds.index("finished")
    # load, prompt and generation lines (a prompt done within 50 ms shares its line with
    # the generation's, one label "prompt generation": the chart merges such markers)
    qtbot.waitUntil(
        lambda: " ".join(page.memory_chart.line_labels).split()[-2:] == ["prompt", "generation"],
        timeout=HANG_GUARD_MS,
    )
    assert page.memory_chart.marker_count >= 2
    n_past = finished.args[0].n_past
    qtbot.waitUntil(lambda: page.kv_panel.n_tokens == n_past, timeout=HANG_GUARD_MS)
    assert f"{n_past:,} tokens" in page.kv_panel.now_label.text()
    assert "now" in page.stats_label.text() and "MiB" in page.stats_label.text()
    assert "psutil" in page.probe_label.text()  # the probe in use is named, with its limits
    assert max(page.memory_chart.y) > 100  # MiB: the engine holds the model's pages


def test_markers_keep_the_engine_order_while_the_gui_thread_is_blocked(qtbot, dashboard):
    client, page, _ = dashboard
    recording = page.sampler.recording
    request = Generate(
        "blocked",
        SamplingSettings(max_tokens=8, temperature=0.0),
        prompt="The tallest mountain on Earth is",
    )
    sent = recording.now()
    # The reader thread hands each engine event to the GUI thread through a queued signal;
    # a direct connection here sees it arrive on the reader thread, while the GUI is blocked.
    engine_done = threading.Event()

    def on_reader_thread(event: object, _generation: int) -> None:
        if isinstance(event, Finished):
            engine_done.set()

    client._event_arrived.connect(on_reader_thread, Qt.ConnectionType.DirectConnection)
    with qtbot.waitSignal(client.reply_finished, timeout=REPLY_MS) as finished:
        client.generate(request)
        # Block the GUI thread until the engine has finished the whole reply: every event
        # (prompt started, tokens, finished) waits in the GUI's queue, none handled yet.
        assert engine_done.wait(REPLY_MS / 1000)
        unblocked = recording.now()
    client._event_arrived.disconnect(on_reader_thread)
    markers = [
        m
        for m in recording.markers
        if m.t >= sent and m.kind in ("prompt", "generation", "finished")
    ]
    assert [m.kind for m in markers] == ["prompt", "generation", "finished"]
    # Placed when the engine started the prompt, not when the GUI got round to it.
    assert markers[0].t < unblocked
    assert markers[0].label == f"prompt: {finished.args[0].prompt_tokens} tokens"


def test_banner_shows_what_llama_cpp_logged_when_flash_attention_is_off(qtbot, dashboard):
    client, page, model = dashboard
    assert not page.banner.isVisible() and page.warnings == ()
    with qtbot.waitSignal(client.model_loaded, timeout=LOAD_MS):
        client.load(LoadProfile(str(model), n_ctx=512, n_threads=ENGINE_THREADS, flash_attn=False))
    # llama.cpp's own line ("llama_context: flash_attn = disabled"), through its log
    # callback, the loader, the engine process, the client and the page.
    assert [w.kind for w in page.warnings] == ["fa_disabled"]
    assert re.search(r"flash_attn\s*=\s*disabled", page.warnings[0].text)
    assert page.banner.isVisible()
    text = page.banner.text()
    assert "The int8-K kernel is not in use:</b> Flash Attention is off" in text
    assert page.warnings[0].text in text
    # The next load starts clean: the warning was about the model it replaced.
    with qtbot.waitSignal(client.model_loaded, timeout=LOAD_MS):
        client.load(LoadProfile(str(model), n_ctx=512, n_threads=ENGINE_THREADS))
    assert not page.banner.isVisible() and page.warnings == () and client.kernel_warnings == ()


def test_a_conversation_longer_than_the_context_raises_no_kernel_banner(qtbot, dashboard):
    client, page, _ = dashboard
    assert client.loaded.n_ctx == 512
    long_turn = " ".join(f"word{i}" for i in range(60))
    messages = [ChatMessage("system", "Be brief.")]
    for i in range(4):
        messages += [ChatMessage("user", f"{i}: {long_turn}"), ChatMessage("assistant", "Noted.")]
    messages.append(ChatMessage("user", "Say hi."))
    trimmed: list = []
    client.context_trimmed.connect(trimmed.append)
    with qtbot.waitSignal(client.reply_finished, timeout=REPLY_MS) as finished:
        client.generate(
            Generate(
                "long-chat",
                SamplingSettings(max_tokens=4, temperature=0.0),
                messages=tuple(messages),
            )
        )
    client.context_trimmed.disconnect(trimmed.append)
    assert len(trimmed) == 1 and trimmed[0].request_id == "long-chat"
    assert trimmed[0].dropped_messages >= 2 and trimmed[0].n_ctx == 512
    assert trimmed[0].prompt_tokens == finished.args[0].prompt_tokens
    assert not page.banner.isVisible() and page.warnings == ()


def test_banner_follows_a_kernel_warning_logged_after_the_load(qtbot, starter_model_path):
    """A warning llama.cpp logs on first use of a kernel (the CUDA "no FlashAttention
    vector kernel compiled for K/V types ..." line), while a reply runs, reaches the
    banner: llama.cpp's logger, the worker's forwarding, the client, the page."""
    from app.engine.process import EngineProcess
    from app.services.engine_client import EngineClient
    from app.ui.dashboard.page import DashboardPage
    from tests import kernel_warning_engine

    client = EngineClient(process_factory=lambda: EngineProcess(target=kernel_warning_engine.main))
    page = DashboardPage(client)
    try:
        page.show()
        with qtbot.waitSignal(client.model_loaded, timeout=LOAD_MS):
            client.load(LoadProfile(str(starter_model_path), n_ctx=512, n_threads=ENGINE_THREADS))
        assert not page.banner.isVisible() and page.warnings == ()
        with qtbot.waitSignal(client.reply_finished, timeout=REPLY_MS):
            client.generate(Generate("first-use", SamplingSettings(max_tokens=2), prompt="Hello"))
        assert [(w.kind, w.text) for w in page.warnings] == [
            ("pair_not_compiled", kernel_warning_engine.LINE)
        ]
        assert page.banner.isVisible()
        assert "this K/V pair is not compiled" in page.banner.text()
        assert "GGML_CUDA_FA_QUANTS" in page.banner.text()
    finally:
        page.shutdown()
        client.shutdown()
        page.close()
        page.deleteLater()


def test_compare_run_fills_the_table_and_exports(qtbot, dashboard, tmp_path, monkeypatch):
    client, page, model = dashboard
    monkeypatch.setenv("KVSTUDIO_DATA_DIR", str(tmp_path / "data"))  # the advisor's store
    time_view = page.compare.time_view
    # Before a run: an estimate of its duration, said to be one.
    assert re.fullmatch(
        r"Estimated time: about [\d a-z]+ \(9 steps; an estimate from this model's load and "
        r"last reply\)\.",
        time_view.label.text(),
    ), time_view.label.text()
    seen: list[tuple[int, str]] = []  # the bar after each of the runner's progress events
    page.runner.progress_changed.connect(
        lambda _f, _m: seen.append((time_view.bar.value(), time_view.bar.format()))
    )
    settings = dict(
        depth=128, quality_chunks=1, chunk_tokens=128, n_prompt=64, n_gen=8, repetitions=1
    )
    with qtbot.waitSignal(page.runner.finished, timeout=COMPARE_MS) as finished:
        page.start_compare(n_ctx=1024, n_threads=ENGINE_THREADS, **settings)
        assert page.compare.cancel_button.isEnabled() and not page.compare.run_button.isEnabled()
        assert time_view.label.text().startswith("Started; estimated about ")
    # The bar moved at each step's end, with the time left, and only forwards.
    values = [v for v, _ in seen]
    assert values == sorted(values) and values[-1] == 1000
    step_texts = list(dict.fromkeys(text for _, text in seen if " steps - " in text))
    assert len(step_texts) == 9, step_texts
    assert all(re.search(r"^\d of 9 steps - about [\d a-z]+ left$", t) for t in step_texts[:-1])
    assert step_texts[-1] == "9 of 9 steps - done" and time_view.bar.format() == "done"
    took = re.fullmatch(r"Took (.+) \(estimated (.+)\)\.", time_view.label.text())
    assert took, time_view.label.text()
    # The next estimate rests on this run's speeds and step times: for the same settings it
    # comes within 10% of this run (a new run differs only by how busy the machine is).
    from app.engine.compare_estimate import compare_steps

    again = compare_steps(page.compare_control.rates(str(model)), **settings)
    assert again.rates.source == "this model's last comparison"
    measured = sum(time_view.step_seconds)
    assert abs(again.total_seconds - measured) < 0.1 * measured, (again, measured)
    table = page.compare.table
    assert table.rowCount() == 3
    assert [table.item(r, 0).text() for r in range(3)] == ["f16/f16", "q8_0/f16", "q8_0/q8_0"]
    for r in range(3):
        for c in range(table.columnCount()):
            assert table.item(r, c).text() not in ("", "-"), (r, c)
    assert page.compare.progress.value() == 1000
    assert page.compare.run_button.isEnabled() and not page.compare.cancel_button.isEnabled()
    assert page.source == "compare" and page.memory_chart.point_count > 10
    # Both peaks say what they measure: the engine's RSS (psutil here), over the whole
    # recording in the stats line, over each mode's load and speed run in the table.
    page._redraw(force_text=True)
    peak_header = table.horizontalHeaderItem(2).text()
    assert peak_header == "Peak RSS (MiB),\nload + speed"
    assert "engine RSS, psutil" in table.horizontalHeaderItem(2).toolTip()
    stats = page.stats_label.text()
    assert "(engine RSS, psutil, whole recording)" in stats, stats
    assert "system RAM" in stats and "device" not in stats  # a CPU has RAM, not a device
    whole_peak = max(p.used_bytes for p in page.compare_recording.points) / 2**20
    assert f"peak <b>{whole_peak:,.0f} MiB</b>" in stats
    for r in range(3):
        assert float(table.item(r, 2).text().replace(",", "")) <= whole_peak + 0.05

    # Headings in words, each abbreviation in its tooltip; the run ends with its gain in words,
    # and one chunk of 128 tokens is too few for quality figures that mean anything: flagged.
    assert table.horizontalHeaderItem(6).text() == "Reply speed\n(tokens/s)"
    assert table.horizontalHeaderItem(6).toolTip().startswith("tg t/s")
    gain = page.compare.gain
    assert gain.isVisible() and gain.text().startswith("On this model int8-K saves ")
    assert "quality: too few tokens scored to tell" in gain.text()
    kl_column = [table.horizontalHeaderItem(c).toolTip()[:3] for c in range(10)].index("KLD")
    assert table.item(1, kl_column).text().endswith(" *")
    assert "tokens were scored" in table.item(1, kl_column).toolTip()

    # The run feeds the KV advisor: its measurements are kept under the file's sha256.
    kept = MeasurementStore(tmp_path / "data").for_model(sha256_of_file(model))
    assert kept is not None, "the Compare run did not reach the advisor's store"
    result = finished.args[0]
    assert [
        (m.mode, m.mean_kl_divergence, m.scored_tokens, m.decode_tokens_per_second, m.depth)
        for m in kept.modes
    ] == [
        (r.mode.label, r.mean_kl_divergence, r.scored_tokens, r.decode_tokens_per_second, 128)
        for r in result.modes
    ]

    csv_path = page.compare.export_csv(tmp_path / "c.csv")
    assert csv_path.read_text().count("\n") == 4
    png = page.compare.export_png(tmp_path / "c.png")
    assert png.read_bytes()[:4] == b"\x89PNG"

    # Save the run's recording, go back to live, re-open it: chart and table come back.
    page.save_recording(tmp_path / "run.json")
    page.set_source("live")
    page.compare.set_rows([])
    page.open_recording(tmp_path / "run.json")
    assert page.source == "file" and page.compare.table.rowCount() == 3
    qtbot.waitUntil(lambda: page.memory_chart.point_count > 10, timeout=HANG_GUARD_MS)
    assert "Compare run" in page.probe_label.text()
    assert page.compare.table.horizontalHeaderItem(2).text() == "Peak RSS (MiB),\nload + speed"
    # A run whose final sample came after its last engine exited (no process seen then)
    # still names the engine's RSS: its peaks were taken while an engine ran.
    saved = json.loads((tmp_path / "run.json").read_text())
    saved["samples"]["process_bytes"][-1] = None
    (tmp_path / "late.json").write_text(json.dumps(saved))
    page.open_recording(tmp_path / "late.json")
    assert page.compare.table.horizontalHeaderItem(2).text() == "Peak RSS (MiB),\nload + speed"
    # The KV panel draws the opened run's modes (no model file needed), with the log's totals.
    assert len(page.kv_panel._run_curves) == 3
    assert "Allocated: f16/f16" in page.kv_panel.alloc_label.text()
    assert "-23.4%" in page.kv_panel.alloc_label.text()
    # Back to live: the panel follows the loaded model again.
    page.set_source("live")
    assert page.kv_panel.loaded is client.loaded and not page.kv_panel._run_curves
    with pytest.raises(BadInputError):
        page.open_recording(csv_path)
