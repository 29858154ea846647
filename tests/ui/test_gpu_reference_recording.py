"""The H200 reference run as the README and docs/gpu-reference-run.md show it: its saved NVML
recording, opened on the dashboard, gives the Compare table the run's own speeds and names the
Flash Attention kernels they were measured with (llama.cpp's own: the build predates
kernels/patches), so they are never read as the patched kernel's."""

from __future__ import annotations

from pathlib import Path

from app.services.engine_client import EngineClient
from app.ui.dashboard.page import DashboardPage

RECORDING = (
    Path(__file__).resolve().parents[2] / "docs" / "gpu-reference-run" / "nvml-recording.json"
)


def test_the_h200_run_opens_with_its_speeds_and_kernel(qtbot) -> None:
    client = EngineClient()
    page = DashboardPage(client)
    qtbot.addWidget(page)
    page.open_recording(RECORDING)
    decode = {r["mode"]: round(r["decode_tokens_per_second"], 1) for r in page.compare.rows}
    assert decode == {"f16/f16": 156.2, "q8_0/f16": 126.2, "q8_0/q8_0": 110.3}
    title = page.compare.chart.title
    assert "depth 32,768 - NVIDIA H200 - FA kernels: upstream" in title, title
    page.shutdown()
    client.shutdown()
