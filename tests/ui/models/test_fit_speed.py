"""Fit badges that mean something: beside "fits", the decode speed this machine would give
(memory bandwidth / bytes read per token); a file that fits but decodes under 5 tokens/s is
marked slow; the largest quantization that fits and is not slow is "Recommended here"; and a
real decode of the loaded model (the starter, through the real engine) replaces the default
bandwidth with the measured one."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.load.fit_speed import (
    DEFAULT_BANDWIDTH,
    SLOW_TOKENS_PER_SECOND,
    best_speed,
    default_bandwidth,
    estimate_speed,
    kv_bytes_in_use,
)
from app.ui.models.repo_files_model import RECOMMENDED
from tests.ui.models.page_driver import GIB, Q8, WAIT, Budget, open_repo, shut, wait_fits
from tests.ui.models.test_discover_tab import write_shaped_gguf

SHAPES = "demo/Llama-3.1-8B-shapes-GGUF"
QWEN = "Qwen/Qwen2.5-0.5B-Instruct-GGUF"  # in the Recommended list


def _cells(page, first_file: str) -> list[str]:
    return [item.text() for item in page.repo_view.model.mode_items(first_file)]


def _quantization(page, first_file: str) -> str:
    """The bold row of the file's quantization ('Q2_K', 'Q2_K  · Recommended here')."""
    return page.repo_view.model.entries[first_file][1].parent().text()


def _speed(page, first_file: str) -> str:
    """The file's "Speed here" cell."""
    return page.repo_view.model.speed_item(first_file).text()


@pytest.fixture(scope="module")
def shaped_files(tmp_path_factory) -> dict[str, Path]:
    """Zero-weight GGUFs with Llama-3.1-8B shapes (real headers, sparse files): Q2_K about
    2.9 GB, Q4_K_M 4.9 GB, Q8_0 8.5 GB."""
    folder = tmp_path_factory.mktemp("shaped")
    files = {}
    for ftype in ("Q2_K", "Q4_K_M", "Q8_0"):
        (path,) = write_shaped_gguf(folder / f"Llama-3.1-8B-shapes-{ftype}.gguf", ftype)
        files[path.name] = path
    return files


def _open_shapes(qtbot, env, hub, shaped_files, monkeypatch, cap: str):
    from app.platform.probes import read_free_memory
    from app.ui.models.page import ModelsPage

    monkeypatch.setenv("KVSTUDIO_FREE_MEMORY", cap)
    fake_sha = {name: f"{i + 1:064x}" for i, name in enumerate(shaped_files)}  # never fetched
    hub.add_repo(
        SHAPES, shaped_files, sha256=fake_sha, last_modified=datetime(2025, 9, 2, tzinfo=UTC)
    )
    page = ModelsPage(env / "data", budget_fn=lambda: read_free_memory(gpu=False))
    qtbot.addWidget(page)
    page.resize(1400, 700)
    page.show()
    open_repo(qtbot, page, SHAPES)
    wait_fits(qtbot, page)
    return page


def test_slow_files_are_marked_and_the_largest_fast_fit_is_recommended(
    qtbot, env, hub, shaped_files, monkeypatch
) -> None:
    page = _open_shapes(qtbot, env, hub, shaped_files, monkeypatch, "7GiB")
    q2, q4, q8 = (f"Llama-3.1-8B-shapes-{t}.gguf" for t in ("Q2_K", "Q4_K_M", "Q8_0"))
    # Nothing decoded here yet: speeds rest on the stated system-RAM default.
    assert "20.0 GB/s, the usual system RAM figure" in page.repo_view.budget_label.text()
    fit = page.repo_view.fit_for(q4)
    assert [m.verdict for m in fit.modes] == ["fits"] * 3
    speed = estimate_speed(fit.weights_bytes, fit.modes[0].kv_bytes, default_bandwidth(False))
    assert speed.tokens_per_second < SLOW_TOKENS_PER_SECOND  # 4.9 GB per token at 20 GB/s
    # Short in the tree (its File column keeps the width), how slow in the tooltip.
    assert _cells(page, q4) == ["fits, slow"] * 3
    tip = page.repo_view.model.mode_items(q4)[0].toolTip()
    assert f"Decode {speed.describe()} on this machine" in tip
    fastest_q4 = best_speed(fit, default_bandwidth(False))
    assert _speed(page, q4) == f"slow: {fastest_q4.short()}"
    assert all(cell.startswith("fits · ") for cell in _cells(page, q2))  # and the largest
    assert _cells(page, q8) == ["does not fit"] * 3 and _speed(page, q8) == "–"
    # The rule: the largest file that fits and is not slow.
    fastest_q2 = best_speed(page.repo_view.fit_for(q2), default_bandwidth(False))
    assert not fastest_q2.slow
    assert _speed(page, q2) == fastest_q2.short()
    assert _quantization(page, q2) == f"Q2_K  · {RECOMMENDED}"
    assert (_quantization(page, q4), _quantization(page, q8)) == ("Q4_K_M", "Q8_0")

    # With room for every file, Q8_0 fits too, but at about 2 tokens/s: Q2_K stays the pick.
    monkeypatch.setenv("KVSTUDIO_FREE_MEMORY", "40GiB")
    page.fit_estimator.refresh_budget()
    page.repo_view.context_spin.setValue(4096 + 256)  # re-estimates every file
    qtbot.waitUntil(lambda: _cells(page, q8)[0] == "fits, slow", timeout=WAIT)
    qtbot.waitUntil(lambda: page.repo_view.fit_for(q2).n_ctx == 4096 + 256, timeout=WAIT)
    assert _quantization(page, q2).endswith(RECOMMENDED) and _speed(page, q8).startswith("slow: ")
    assert not _quantization(page, q8).endswith(RECOMMENDED)
    assert page.repo_view.model.recommended == q2
    shut(page)


@pytest.mark.slow
def test_a_real_decode_replaces_the_default_bandwidth(qtbot, env, starter_model_path) -> None:
    from app.engine.messages import Generate, SamplingSettings
    from app.load.profile import LoadProfile
    from app.services.engine_client import EngineClient
    from app.ui.models.page import ModelsPage
    from tests.engine_threads import ENGINE_THREADS

    engine = EngineClient()
    page = ModelsPage(env / "data", budget_fn=Budget(8 * GIB), engine=engine)
    qtbot.addWidget(page)
    page.resize(1280, 700)
    page.show()
    open_repo(qtbot, page)
    wait_fits(qtbot, page)
    fit = page.repo_view.fit_for(Q8)
    default = best_speed(fit, default_bandwidth(False))
    assert _speed(page, Q8) == default.short()
    recommended = page.search_view.recommended
    qtbot.waitUntil(lambda: recommended.fit_for(QWEN) is not None, timeout=WAIT)
    assert recommended.speed_for(QWEN).bandwidth == default_bandwidth(False)
    assert page.repo_view.measured_bandwidth is None

    with qtbot.waitSignal(engine.model_loaded, timeout=120_000) as loaded:
        engine.load(LoadProfile(str(starter_model_path), n_ctx=512, n_threads=ENGINE_THREADS))
    request = Generate("speed-1", SamplingSettings(max_tokens=8, seed=1), prompt="The sea is")
    with qtbot.waitSignal(engine.reply_finished, timeout=120_000) as finished:
        engine.generate(request)
    done = finished.args[0]
    assert done.generated_tokens >= 2 and done.tokens_per_second > 0

    measured = page.repo_view.measured_bandwidth
    assert measured is not None and starter_model_path.stem in measured.measured
    caches = ((c.total_bytes, c.cells) for c in loaded.args[0].kv_caches)
    read = starter_model_path.stat().st_size + kv_bytes_in_use(caches, done.n_past)
    assert measured.bytes_per_second == pytest.approx(done.tokens_per_second * read)
    assert measured.bytes_per_second != DEFAULT_BANDWIDTH[False]
    after = best_speed(fit, measured)
    assert after.short() != default.short()
    assert _speed(page, Q8) == after.short()
    assert "measured from" in page.repo_view.budget_label.text()
    # The Recommended list's speeds rest on the same measurement.
    qwen = recommended.speed_for(QWEN)
    assert qwen.bandwidth == measured
    row = next(r for r in range(recommended.rowCount()) if recommended.row_at(r).repo_id == QWEN)
    tooltip = recommended.index(row, 3).data(Qt.ItemDataRole.ToolTipRole)
    assert f"Decode {qwen.describe()} on this machine" in tooltip and "measured from" in tooltip
    shut(page)
    engine.shutdown()


def test_the_repo_view_reads_at_aa_in_both_looks(qtbot, env, hub, shaped_files, monkeypatch):
    """The estimate's sentence (what the speeds rest on) was palette(mid): 2.2:1 in light."""
    from PySide6.QtWidgets import QApplication

    from app.ui.theme import DARK, LIGHT, show_scheme
    from tests.ui.contrast import contrast_problems

    app = QApplication.instance()
    sheet, palette = app.styleSheet(), app.palette()
    page = _open_shapes(qtbot, env, hub, shaped_files, monkeypatch, "7GiB")
    try:
        page.repo_view.select_entry("Llama-3.1-8B-shapes-Q4_K_M.gguf")  # its detail table too
        for scheme in (LIGHT, DARK):
            show_scheme(app, scheme)
            QApplication.processEvents()
            assert contrast_problems(page.repo_view) == [], scheme
    finally:
        app.setStyleSheet(sheet)
        app.setPalette(palette)
        shut(page)
