"""`kvstudio run` as a user types it: bad input is one line and exit 2; a real run works."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.kv.fit import memory_need
from app.load.load_check import free_memory_for
from app.models.gguf_read import read_gguf_header
from app.platform import units
from tests.cli_runner import assert_bad_input, kvstudio
from tests.gguf_factory import write_tiny_gguf

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory, starter_model_path):
    folder = tmp_path_factory.mktemp("bad")
    not_gguf = folder / "readme.gguf"
    not_gguf.write_text("hello, I am not a model\n" * 20)
    truncated = folder / "cut.gguf"
    with starter_model_path.open("rb") as f:
        truncated.write_bytes(f.read(50_000_000))  # the header is whole, the tensors are not
    return {"not_gguf": not_gguf, "truncated": truncated}


def test_missing_file(tmp_path):
    assert_bad_input(kvstudio("run", str(tmp_path / "nope.gguf"), "-p", "hi"), "does not exist")


def test_not_a_gguf(bad_files):
    assert_bad_input(kvstudio("run", str(bad_files["not_gguf"]), "-p", "hi"), "not a GGUF")


def test_truncated_gguf(bad_files):
    assert_bad_input(kvstudio("run", str(bad_files["truncated"]), "-p", "hi"), "truncated")


@pytest.mark.parametrize("kv", ["q9_0/f16", "q8_0/f99", "q8_0/f16/f16", "/"])
def test_unknown_kv_type(kv):
    assert_bad_input(kvstudio("run", "starter", "-p", "hi", "--kv", kv), "KV")


@pytest.mark.parametrize("ctx", ["0", "-1"])
def test_context_must_be_positive(ctx):
    assert_bad_input(kvstudio("run", "starter", "-p", "hi", "--ctx", ctx), "--ctx")


def test_a_context_llama_cpp_cannot_hold_is_one_line():
    # Once this spawned an engine that was OOM-killed (the uint32 n_ctx wrapped to 1.2 billion).
    result = kvstudio("run", "starter", "-p", "hi", "--ctx", "99999999999")
    assert_bad_input(
        result,
        "--ctx 99,999,999,999 is more tokens than llama.cpp can hold (4,294,967,040 at most)",
    )


def test_beyond_the_trained_context_is_refused_before_loading(starter_model_path):
    result = kvstudio("run", "starter", "-p", "hi", "--ctx", "40000")
    assert_bad_input(
        result, "40,000 tokens is beyond this model's trained context of 32,768 tokens"
    )
    assert "pass --force" in result.stderr


@pytest.mark.slow
def test_a_load_bigger_than_free_memory_is_refused_with_the_numbers(tmp_path):
    import psutil

    # A small model trained for a billion tokens: its KV cache at that context (730 GiB) is
    # more than this machine's free memory, read by the real probe.
    model = write_tiny_gguf(tmp_path / "long.gguf", n_ctx_train=1_000_000_000)
    header = read_gguf_header(model)
    need = memory_need(
        header, 1_000_000_000, "q8_0/f16", file_size=model.stat().st_size, on_gpu=False
    )
    assert need.total_bytes > psutil.virtual_memory().total
    result = kvstudio("run", str(model), "-p", "hi", "--ctx", "1000000000", "--gpu-layers", "0")
    kv = units.size(need.kv_bytes, 1)
    assert_bad_input(result, f"needs {kv} for the KV cache at 1,000,000,000 tokens")
    assert "but system RAM has " in result.stderr and " GiB free (" in result.stderr
    assert "tokens would fit); lower --ctx, or pass --force to load anyway." in result.stderr


def small_budget_env(starter_model_path: Path, n_ctx: int) -> dict[str, str]:
    """KVSTUDIO_FREE_MEMORY one byte below what the starter model needs at `n_ctx` (this
    machine has far more free: only a smaller figure can make a real load refuse)."""
    header = read_gguf_header(starter_model_path)
    on_gpu = free_memory_for(-1, header.block_count).on_gpu
    need = memory_need(
        header, n_ctx, "q8_0/f16", file_size=starter_model_path.stat().st_size, on_gpu=on_gpu
    )
    return {"KVSTUDIO_FREE_MEMORY": str(need.total_bytes - 1)}


@pytest.mark.slow
def test_force_loads_a_context_just_over_the_free_memory(starter_model_path):
    env = small_budget_env(starter_model_path, 2048)
    args = (
        "run",
        "starter",
        "-p",
        "One, two, three,",
        "-n",
        "4",
        "--ctx",
        "2048",
        "--temp",
        "0",
        "--json",
    )
    refused = kvstudio(*args, env=env)
    assert_bad_input(refused, "for the KV cache at 2,048 tokens")
    assert "1,792 tokens would fit" in refused.stderr  # the largest multiple of 256 under it
    forced = kvstudio(*args, "--force", env=env)
    assert forced.returncode == 0, forced.stderr
    report = json.loads(forced.stdout)
    assert report["n_ctx"] == 2048 and report["generated_tokens"] == 4


def test_missing_prompt_is_a_usage_line():
    assert_bad_input(kvstudio("run", "starter"), "-p/--prompt")


@pytest.mark.slow
def test_real_run_json_on_the_starter():
    result = kvstudio(
        "run",
        "starter",
        "-p",
        "The capital of France is",
        "-n",
        "8",
        "--ctx",
        "1024",
        "--temp",
        "0",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["generated_tokens"] == 8 and report["text"].strip()
    assert report["prompt_tokens"] >= 5 and report["tokens_per_second"] > 0
    assert report["kv_mode"] == "q8_0/f16" and report["n_ctx"] == 1024
    caches = report["kv_caches"]
    assert sorted(c["sliding_window"] for c in caches) == [False, True]
    assert all(c["k_type"] == "q8_0" and c["v_type"] == "f16" for c in caches)
    assert report["kv_total_bytes"] == sum(c["total_bytes"] for c in caches)
    assert report["compute_buffers"][0]["bytes"] > 0 and report["warnings"] == []


@pytest.mark.slow
def test_real_run_streams_text_to_stdout():
    result = kvstudio(
        "run",
        "starter",
        "-p",
        "One, two, three,",
        "-n",
        "6",
        "--ctx",
        "1024",
        "--temp",
        "0",
        "--kv",
        "f16/f16",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    assert "6 tokens" in result.stderr and "f16/f16" in result.stderr


@pytest.mark.slow
def test_ctrl_c_stops_the_reply_and_keeps_what_came():
    import signal

    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app",
            "run",
            "starter",
            "-p",
            "Once upon a time",
            "-n",
            "2000",
            "--ctx",
            "4096",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    try:
        # The reply has started streaming once a visible character came (the
        # model's first token may be a lone space).
        first = ""
        while not first.strip():
            char = proc.stdout.read(1)
            assert char, "the reply ended before any visible text"
            first += char
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl+C in a terminal does: the whole group
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "tokens" in err  # the summary line, not a crash
    assert (first + out).strip()
