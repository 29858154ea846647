"""The Dashboard page with the real engine on the starter model, offscreen: the memory
chart updates while a reply streams, markers appear, the KV panel follows the context,
the int8-K warning banner shows, and a Compare run fills its table and exports."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("pytestqt")

from app.core.errors import BadInputError
from app.engine.messages import Generate, LoadOptions, LogWarning, SamplingSettings

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
        client.load(LoadOptions(str(model), n_ctx=2048, n_threads=2))
    assert "Allocated for 2,048 tokens" in page.kv_panel.alloc_label.text()
    assert "saving" in page.kv_panel.now_label.text()

    chart_sizes: list[int] = []
    client.token_received.connect(lambda _t: chart_sizes.append(page.memory_chart.point_count))
    request = Generate("dash-1", SamplingSettings(max_tokens=96, temperature=0.8, seed=3),
                       prompt="A short history of the Python programming language:")
    with qtbot.waitSignal(client.reply_finished, timeout=REPLY_MS) as finished:
        client.generate(request)
    # The chart grew while tokens were arriving (redrawn from the sampler's buffer at 10 Hz).
    assert len(chart_sizes) > 10 and chart_sizes[-1] > chart_sizes[0] > 0
    kinds = [m.kind for m in page.sampler.recording.markers]
    for kind in ("load", "loaded", "prompt", "generation", "finished"):
        assert kind in kinds, kinds
    assert kinds.index("prompt") < kinds.index("generation") < kinds.index("finished")
    qtbot.waitUntil(lambda: page.memory_chart.marker_count >= 3, timeout=2000)
    n_past = finished.args[0].n_past
    qtbot.waitUntil(lambda: page.kv_panel.n_tokens == n_past, timeout=2000)
    assert f"{n_past:,} tokens" in page.kv_panel.now_label.text()
    assert "now" in page.stats_label.text() and "MiB" in page.stats_label.text()
    assert "psutil" in page.probe_label.text()  # the probe in use is named, with its limits
    assert max(page.memory_chart.y) > 100  # MiB: the engine holds the model's pages


def test_banner_when_the_int8_k_kernel_is_not_used(qtbot, dashboard):
    client, page, _ = dashboard
    assert not page.banner.isVisible()
    client.warning_logged.emit(LogWarning(
        "kv_converted_to_f16", "ggml_cuda_flash_attn_ext: converting K and V to f16 instead (slow)"))
    assert page.banner.isVisible()
    assert "not in use" in page.banner.text() and "converting K and V" in page.banner.text()


def test_compare_run_fills_the_table_and_exports(qtbot, dashboard, tmp_path):
    client, page, _ = dashboard
    with qtbot.waitSignal(page.runner.finished, timeout=COMPARE_MS):
        page.start_compare(n_ctx=1024, depth=128, quality_chunks=1, chunk_tokens=256,
                           n_prompt=128, n_gen=8, n_threads=2, repetitions=1)
        assert page.compare.cancel_button.isEnabled() and not page.compare.run_button.isEnabled()
    table = page.compare.table
    assert table.rowCount() == 3
    assert [table.item(r, 0).text() for r in range(3)] == ["f16/f16", "q8_0/f16", "q8_0/q8_0"]
    for r in range(3):
        for c in range(table.columnCount()):
            assert table.item(r, c).text() not in ("", "-"), (r, c)
    assert page.compare.progress.value() == 1000
    assert page.compare.run_button.isEnabled() and not page.compare.cancel_button.isEnabled()
    assert page.source == "compare" and page.memory_chart.point_count > 10

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
    qtbot.waitUntil(lambda: page.memory_chart.point_count > 10, timeout=2000)
    assert "Compare run" in page.probe_label.text()
    # The KV panel draws the opened run's modes (no model file needed), with the log's totals.
    assert len(page.kv_panel._run_curves) == 3
    assert "Allocated: f16/f16" in page.kv_panel.alloc_label.text()
    assert "-23.4%" in page.kv_panel.alloc_label.text()
    # Back to live: the panel follows the loaded model again.
    page.set_source("live")
    assert page.kv_panel.loaded is client.loaded and not page.kv_panel._run_curves
    with pytest.raises(BadInputError):
        page.open_recording(csv_path)
