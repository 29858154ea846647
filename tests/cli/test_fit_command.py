"""`kvstudio fit` as a user types it: the table, the JSON, and one-line errors with exit 2."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from app.kv.kv_cache import kv_cache_bytes
from app.kv.kv_types import COMPARE_MODES
from app.models.gguf_read import read_gguf_header
from tests.cli_runner import kvstudio as run_kvstudio
from tests.gguf_factory import write_tiny_gguf


def kvstudio(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_kvstudio(*args, timeout=timeout)


def assert_bad_input(result: subprocess.CompletedProcess[str], words: str) -> None:
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("kvstudio: ") and words in lines[0], lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.fixture(scope="module")
def gemma_like(tmp_path_factory) -> Path:
    return write_tiny_gguf(
        tmp_path_factory.mktemp("fitcli") / "gemma-like.gguf",
        arch="gemma3",
        n_layer=6,
        n_head=4,
        n_head_kv=1,
        head_dim=256,
        sliding_window=512,
        n_ctx_train=32768,
    )


def test_table_for_every_mode(gemma_like):
    result = kvstudio("fit", str(gemma_like), "--vram", "1GiB", "--ctx", "8192")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for mode in ("f16/f16", "q8_0/f16", "q8_0/q8_0"):
        assert mode in out
    assert "23.4%" in out and "46.9%" in out  # saving vs fp16 of K-only and K+V int8
    assert (
        "global: 1 layers x 8,192 cells" in out and "sliding-window: 5 layers x 1,024 cells" in out
    )
    assert "fits" in out and "Budget 1.00 GiB (--vram)" in out


def test_json_matches_the_kv_arithmetic(gemma_like):
    result = kvstudio("fit", str(gemma_like), "--vram", "24GiB", "--ctx", "3001", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    header = read_gguf_header(gemma_like)
    assert [m["kv"] for m in report["modes"]] == [m.label for m in COMPARE_MODES]
    assert report["budget_bytes"] == 24 * 1024**3 and report["n_ctx_allocated"] == 3072
    for entry, mode in zip(report["modes"], COMPARE_MODES, strict=True):
        estimate = kv_cache_bytes(header, 3001, mode)
        assert (entry["kv_bytes"], entry["k_bytes"], entry["v_bytes"]) == (
            estimate.total_bytes,
            estimate.k_bytes,
            estimate.v_bytes,
        )
        assert [c["llama_log_line"] for c in entry["caches"]] == [
            c.log_line() for c in estimate.caches
        ]
        assert entry["verdict"] == "fits" and entry["largest_n_ctx"] == 32768
    f16, q8k = report["modes"][0], report["modes"][1]
    assert q8k["k_bytes"] * 64 == f16["k_bytes"] * 34 and q8k["v_bytes"] == f16["v_bytes"]


def test_one_mode_and_a_budget_too_small(gemma_like):
    result = kvstudio("fit", str(gemma_like), "--vram", "3MiB", "--kv", "q8_0/f16", "--json")
    report = json.loads(result.stdout)
    (mode,) = report["modes"]
    assert (
        mode["kv"] == "q8_0/f16"
        and mode["verdict"] == "does not fit"
        and mode["largest_n_ctx"] == 0
    )


def test_budget_defaults_to_free_memory_now(gemma_like):
    report = json.loads(kvstudio("fit", str(gemma_like), "--json").stdout)
    assert report["budget_bytes"] > 0
    assert report["budget_source"].startswith("free ")


@pytest.mark.slow
def test_starter_model(starter_model_path):
    result = kvstudio("fit", "starter", "--vram", "8GiB", "--ctx", "8192", "--swa-full", "--json")
    report = json.loads(result.stdout)
    # docs/llama-cpp-notes.md, measured at 8192: f16/f16 144 MiB, q8_0/f16 110.25 MiB,
    # q8_0/q8_0 76.5 MiB.
    assert [m["kv_bytes"] / 2**20 for m in report["modes"]] == [144.0, 110.25, 76.5]


@pytest.mark.parametrize(
    "args, words",
    [
        (["--vram", "24 parsecs"], "not a memory size"),
        (["--vram", "0GiB"], "more than zero"),
        (["--ctx", "0"], "--ctx must be a positive"),
        (["--ctx", "-4096"], "--ctx must be a positive"),
        (["--kv", "q9_0/f16"], "Unknown KV cache type"),
        (["--kv", "q8_0/f16/f16"], "K/V"),
        (["--ubatch", "0"], "--ubatch"),
    ],
)
def test_bad_options(gemma_like, args, words):
    assert_bad_input(kvstudio("fit", str(gemma_like), *args), words)


def test_a_context_llama_cpp_cannot_hold_is_one_line(gemma_like):
    # Once this printed a table of 100,000,000,000 cells with overflowing columns.
    assert_bad_input(
        kvstudio("fit", str(gemma_like), "--ctx", "99999999999"),
        "--ctx 99,999,999,999 is more tokens than llama.cpp can hold (4,294,967,040 at most)",
    )


def test_beyond_the_trained_context_needs_force(gemma_like):
    refused = kvstudio("fit", str(gemma_like), "--vram", "8GiB", "--ctx", "40000")
    assert_bad_input(
        refused, "40,000 tokens is beyond this model's trained context of 32,768 tokens"
    )
    assert "pass --force to see it anyway" in refused.stderr
    shown = kvstudio("fit", str(gemma_like), "--vram", "8GiB", "--ctx", "40000", "--force")
    assert shown.returncode == 0, shown.stderr
    assert "KV cache at n_ctx 40,000" in shown.stdout


def table(out: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("K/V"))
    return lines[start : start + 4]


@pytest.mark.parametrize("ctx, vram", [("4096", "1GiB"), ("4000000000", "4TiB")])
def test_table_columns_line_up_at_any_size(tmp_path, ctx, vram):
    model = write_tiny_gguf(tmp_path / "long.gguf", n_ctx_train=4_000_000_000)
    result = kvstudio("fit", str(model), "--vram", vram, "--ctx", ctx)
    assert result.returncode == 0, result.stderr
    head, *rows = table(result.stdout)
    assert len(rows) == 3
    for label in ("KV total", "need", "largest n_ctx"):  # right-aligned under their header
        end = head.index(label) + len(label)
        assert all(row[end - 1] != " " and (end == len(row) or row[end] == " ") for row in rows), (
            result.stdout
        )
    verdict_at = head.index("verdict")
    assert all(row[verdict_at:].startswith(("fits", "tight", "does not fit")) for row in rows), (
        result.stdout
    )


@pytest.mark.slow
def test_bad_model_files(tmp_path, gemma_like):
    assert_bad_input(kvstudio("fit", str(tmp_path / "nope.gguf")), "does not exist")
    text = tmp_path / "notes.gguf"
    text.write_text("not a model\n" * 10)
    assert_bad_input(kvstudio("fit", str(text)), "not a GGUF")
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(gemma_like.read_bytes()[:-4096])
    assert_bad_input(kvstudio("fit", str(cut)), "truncated")
