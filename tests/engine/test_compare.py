"""The A/B comparison on the real starter model: three modes, each in a fresh engine
process, measured (KV bytes from llama.cpp's log, memory from the probe, speeds at a
depth, quality against f16/f16), recorded, and exported."""

from __future__ import annotations

import csv
import io
import json
import math
import threading

import pytest

from app.engine.compare import parse_modes, run_compare
from app.engine.compare_one_mode import CompareCancelledError
from app.kv.kv_cache import kv_cache_bytes
from app.models.gguf_read import read_gguf_header
from app.platform.errors import BadInputError
from app.platform.probes import PsutilProbe
from app.platform.recording import Recording
from app.platform.units import llama_mib
from tests.child_processes import running_children
from tests.engine_threads import ENGINE_THREADS

pytestmark = pytest.mark.slow
N_CTX, DEPTH = 1024, 128


@pytest.fixture(scope="module")
def compared(starter_model_path):
    progress: list[tuple[float, str]] = []
    result = run_compare(
        starter_model_path,
        n_ctx=N_CTX,
        depth=DEPTH,
        n_prompt=64,
        n_gen=8,
        quality_chunks=2,
        chunk_tokens=128,
        n_threads=ENGINE_THREADS,
        probe=PsutilProbe(),
        repetitions=1,
        progress_cb=lambda f, m: progress.append((f, m)),
    )
    return result, progress


def test_three_modes_measured(compared):
    result, _ = compared
    assert [m.mode.label for m in result.modes] == ["f16/f16", "q8_0/f16", "q8_0/q8_0"]
    for mode in result.modes:
        assert mode.n_ctx == N_CTX
        assert mode.kv_allocated_bytes > 0 and mode.k_bytes > 0 and mode.v_bytes > 0
        assert (
            mode.peak_memory_bytes and mode.peak_memory_bytes > 100 * 2**20
        )  # the model's pages at least
        assert mode.prompt_tokens_per_second > 0 and mode.decode_tokens_per_second > 0
        assert math.isfinite(mode.perplexity) and math.isfinite(mode.mean_kl_divergence)
        assert 0 < mode.top1_agreement <= 1
    assert result.probe == "psutil"


def test_int8_k_allocation_is_exactly_34_of_64(compared, starter_model_path):
    result, _ = compared
    header = read_gguf_header(starter_model_path)
    exact = {m.mode.label: kv_cache_bytes(header, N_CTX, m.mode) for m in result.modes}
    # The exact bytes: q8_0 K is 34 bytes per 32 values, f16 64 bytes per 32 values.
    assert exact["q8_0/f16"].k_bytes * 64 == exact["f16/f16"].k_bytes * 34
    assert exact["q8_0/q8_0"].v_bytes * 64 == exact["f16/f16"].v_bytes * 34
    assert exact["q8_0/f16"].v_bytes == exact["f16/f16"].v_bytes
    # ...and they are what llama.cpp allocated, as its own log printed them, per cache.
    for mode in result.modes:
        printed = [line.split("K (")[1] for line in mode.kv_lines]
        computed = [
            f"{c.k_type}): {llama_mib(c.k_bytes)} MiB, V ({c.v_type}): {llama_mib(c.v_bytes)} MiB"
            for c in exact[mode.mode.label].caches
        ]
        assert printed == computed, mode.mode
    rows = {r["mode"]: r for r in result.rows()}
    # Each compute buffer as llama.cpp printed it, saved beside the total: here the CPU's only.
    saved = result.to_dict()["compute_buffers"]
    for label, row in rows.items():
        assert list(saved[label]) == ["CPU"] and saved[label]["CPU"] > 0
        assert sum(saved[label].values()) == pytest.approx(row["compute_buffer_mib"], abs=0.01)
    assert rows["q8_0/f16"]["kv_saving_percent"] == pytest.approx(23.4, abs=0.1)
    assert rows["q8_0/q8_0"]["kv_saving_percent"] == pytest.approx(46.9, abs=0.1)


def test_quality_against_fp16(compared):
    result, _ = compared
    f16 = result.modes[0]
    assert f16.mean_kl_divergence == 0.0 and f16.top1_agreement == 1.0
    assert f16.scored_tokens == 2 * 63
    for mode in result.modes[1:]:
        assert abs(mode.perplexity - f16.perplexity) / f16.perplexity < 0.05
        assert 0 < mode.mean_kl_divergence < 0.1
        assert mode.top1_agreement > 0.8


def test_progress_and_recording(compared, tmp_path):
    result, progress = compared
    fractions = [f for f, _ in progress]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    rec = result.recording
    assert len(rec.points) > 20  # 10 Hz over the whole run
    kinds = [m.kind for m in rec.markers]
    for kind in ("mode", "load", "loaded", "prompt", "generation", "quality", "end"):
        assert kinds.count(kind) == 3, kind
    assert rec.metadata["results"][1]["mode"] == "q8_0/f16"
    # JSON round trip: what the dashboard opens is what was measured.
    again = Recording.load(rec.save(tmp_path / "run.json"))
    assert [p.used_bytes for p in again.points] == [p.used_bytes for p in rec.points]
    assert [p.t for p in again.points] == pytest.approx([p.t for p in rec.points], abs=1e-3)
    assert again.markers == rec.markers
    assert again.probe_name == "psutil" and again.metadata["n_ctx"] == N_CTX


def test_exports(compared):
    result, _ = compared
    rows = list(csv.DictReader(io.StringIO(result.to_csv())))
    assert [r["mode"] for r in rows] == ["f16/f16", "q8_0/f16", "q8_0/q8_0"]
    assert float(rows[2]["kv_allocated_mib"]) < float(rows[0]["kv_allocated_mib"])
    data = json.loads(result.to_json())
    assert data["n_ctx"] == N_CTX and len(data["modes"]) == 3
    table = result.table()
    assert "q8_0/q8_0" in table and "KV alloc MiB" in table


def test_parse_modes():
    assert [m.label for m in parse_modes("q8_0/q8_0")] == ["f16/f16", "q8_0/q8_0"]
    assert [m.label for m in parse_modes("q8_0/f16,f16/f16,q8_0/f16")] == ["f16/f16", "q8_0/f16"]
    with pytest.raises(BadInputError):
        parse_modes("q9_0/f16")


def test_bad_settings_refused_before_any_engine(starter_model_path, tmp_path):
    with pytest.raises(BadInputError, match="fit"):
        run_compare(starter_model_path, n_ctx=1024, depth=1000, probe=PsutilProbe())
    with pytest.raises(BadInputError, match="No model"):
        run_compare(tmp_path / "none.gguf", probe=PsutilProbe())


def test_a_load_that_cannot_fit_is_refused_before_any_engine(starter_model_path, monkeypatch):
    from app.platform.errors import NotEnoughMemoryError

    monkeypatch.setenv("KVSTUDIO_FREE_MEMORY", "1MiB")  # the probes' cap: a tiny device
    before = running_children()
    with pytest.raises(NotEnoughMemoryError, match=r"has 1\.0 MiB free .*; lower the context\.$"):
        run_compare(
            starter_model_path,
            n_ctx=1024,
            depth=0,
            probe=PsutilProbe(),
            load_advice="lower the context",
        )
    assert running_children() <= before


def test_cancel_stops_the_engine(starter_model_path):
    cancel = threading.Event()
    before = running_children()

    def on_progress(fraction: float, message: str) -> None:
        if "loaded" in message:
            cancel.set()

    with pytest.raises(CompareCancelledError):
        run_compare(
            starter_model_path,
            n_ctx=1024,
            depth=0,
            n_prompt=128,
            n_gen=8,
            quality_chunks=1,
            probe=PsutilProbe(),
            progress_cb=on_progress,
            cancel=cancel,
        )
    assert running_children() <= before
