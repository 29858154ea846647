"""`kvstudio bench` as a user types it: bad input is one line and exit 2 (before any engine
starts); a real small run prints a table or JSON and writes the recording, CSV and plot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SMALL = ("--ctx", "1024", "--depth", "256", "--prompt-tokens", "128", "--gen-tokens", "8",
         "--chunks", "1", "--chunk-tokens", "256", "--threads", "2")


def kvstudio(*args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen")
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)


def assert_bad_input(result: subprocess.CompletedProcess[str], words: str) -> None:
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("kvstudio: ") and words in lines[0], lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("bench",), "MODEL"),
        (("bench", "/nonexistent/model.gguf"), "does not exist"),
        (("bench", "starter", "--modes", "q9_0/f16"), "KV"),
        (("bench", "starter", "--modes", ","), "at least one KV mode"),
        (("bench", "starter", "--ctx", "0"), "--ctx"),
        (("bench", "starter", "--ctx", "1024", "--depth", "1000"), "does not fit"),
        (("bench", "starter", "--depth", "-5"), "--depth"),
        (("bench", "starter", "--chunks", "-1"), "--chunks"),
        (("bench", "starter", "--ctx", "1024", "--chunk-tokens", "2048"), "--chunk-tokens"),
        (("bench", "starter", "--plot", "chart.jpg"), ".png"),
        (("bench", "starter", "--ctx", "many"), "invalid int"),
        (("bench", "--results", "/nonexistent/run.json"), "No results file"),
    ],
)
def test_bad_input(args, words):
    assert_bad_input(kvstudio(*args), words)


@pytest.mark.slow
def test_real_run_json_record_csv_and_plot(tmp_path):
    record, csv_path, plot = tmp_path / "rec.json", tmp_path / "run.csv", tmp_path / "run.png"
    result = kvstudio("bench", "starter", *SMALL, "--json", "--record", str(record), "--csv", str(csv_path))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    rows = {r["mode"]: r for r in data["modes"]}
    assert list(rows) == ["f16/f16", "q8_0/f16", "q8_0/q8_0"]
    assert rows["q8_0/f16"]["kv_saving_percent"] == pytest.approx(23.4, abs=0.1)
    for row in rows.values():
        assert row["peak_memory_mib"] > 0 and row["prompt_tokens_per_second"] > 0
        assert row["decode_tokens_per_second"] > 0 and row["perplexity"] > 1
    assert "[100%]" in result.stderr  # progress went to stderr, JSON alone to stdout
    saved = json.loads(record.read_text())
    assert saved["format"] == "kvstudio-memory-recording" and len(saved["samples"]["t"]) > 10
    assert {m["kind"] for m in saved["markers"]} >= {"load", "prompt", "generation"}
    assert csv_path.read_text().splitlines()[0].startswith("mode,")

    # The saved JSON is re-printed as a table and plotted without measuring again.
    results = tmp_path / "run.json"
    results.write_text(result.stdout)
    again = kvstudio("bench", "--results", str(results), "--plot", str(plot))
    assert again.returncode == 0, again.stderr
    assert "q8_0/q8_0" in again.stdout and "KV alloc MiB" in again.stdout
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_table_output(tmp_path):
    result = kvstudio("bench", "starter", *SMALL, "--modes", "q8_0/f16", "--chunks", "0")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "memory from psutil" in lines[0]
    assert lines[1].split()[:3] == ["mode", "KV", "alloc"]
    assert [line.split()[0] for line in lines[3:5]] == ["f16/f16", "q8_0/f16"]
    assert " - " in lines[3] or lines[3].rstrip().endswith("-")  # no quality asked: PPL is '-'
