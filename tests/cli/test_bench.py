"""`kvstudio bench` as a user types it: bad input is one line and exit 2 (before any engine
starts); a real small run prints a table or JSON, writes the recording, CSV and plot, and
keeps its measurements for the KV advisor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.kv.advisor_store import MeasurementStore, sha256_of_file
from tests.cli_runner import kvstudio as run_kvstudio
from tests.engine_threads import ENGINE_THREADS

ROOT = Path(__file__).resolve().parents[2]
SMALL = (
    "--ctx",
    "1024",
    "--depth",
    "128",
    "--prompt-tokens",
    "64",
    "--gen-tokens",
    "8",
    "--chunks",
    "1",
    "--chunk-tokens",
    "128",
    "--threads",
    str(ENGINE_THREADS),
    "--repetitions",
    "1",
)


def kvstudio(
    *args: str, timeout: float = 400, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return run_kvstudio(*args, timeout=timeout, env={"QT_QPA_PLATFORM": "offscreen", **(env or {})})


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
        (("bench", "starter", "--repetitions", "0"), "--repetitions"),
        (("bench", "starter", "--ctx", "1024", "--chunk-tokens", "2048"), "--chunk-tokens"),
        (("bench", "starter", "--plot", "chart.jpg"), ".png"),
        (("bench", "starter", "--ctx", "many"), "invalid int"),
        (("bench", "--results", "/nonexistent/run.json"), "No results file"),
    ],
)
def test_bad_input(args, words):
    assert_bad_input(kvstudio(*args), words)


@pytest.mark.slow
def test_real_run_json_record_csv_and_plot(tmp_path, starter_model_path):
    record, csv_path, plot = tmp_path / "rec.json", tmp_path / "run.csv", tmp_path / "run.png"
    data_dir = {"KVSTUDIO_DATA_DIR": str(tmp_path / "data")}
    result = kvstudio(
        "bench",
        "starter",
        *SMALL,
        "--json",
        "--record",
        str(record),
        "--csv",
        str(csv_path),
        env=data_dir,
    )
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
    # The run is kept for `kvstudio advise`, under the model file's sha256: speed at its depth.
    kept = MeasurementStore(tmp_path / "data").for_model(sha256_of_file(starter_model_path))
    assert kept is not None, "kvstudio bench did not reach the advisor's store"
    assert [(m.mode, m.depth) for m in kept.modes] == [(mode, 128) for mode in rows]
    for m in kept.modes:
        decode = rows[m.mode]["decode_tokens_per_second"]
        assert m.decode_tokens_per_second == pytest.approx(decode, rel=0.01)

    # The saved JSON is re-printed as a table and plotted without measuring again.
    results = tmp_path / "run.json"
    results.write_text(result.stdout)
    again = kvstudio("bench", "--results", str(results), "--plot", str(plot))
    assert again.returncode == 0, again.stderr
    assert "q8_0/q8_0" in again.stdout and "KV alloc MiB" in again.stdout
    # ...and ends with what int8-K gains, in words, from the saved figures.
    gain = again.stdout.strip().splitlines()[-1]
    saved_kv = rows["q8_0/f16"]["kv_saving_mib"]
    assert gain.startswith(f"On this model int8-K saves {saved_kv:,.1f} MiB of KV cache (23%)")
    assert rows["q8_0/f16"]["scored_tokens"] > 0 and "quality" in gain and "decode" in gain
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# Makes `import PySide6` / `import pyqtgraph` fail, as on a GPU machine without Qt.
NO_QT = """
import sys
class _NoQt:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("PySide6", "shiboken6", "pyqtgraph"):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)")
        return None
sys.meta_path.insert(0, _NoQt())
from app.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_table_output_without_qt(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), KVSTUDIO_DATA_DIR=str(tmp_path / "data"))
    args = ["bench", "starter", *SMALL, "--modes", "q8_0/f16", "--chunks", "0"]
    result = subprocess.run(
        [sys.executable, "-c", NO_QT, *args],
        capture_output=True,
        text=True,
        timeout=400,
        cwd=ROOT,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "memory from psutil" in lines[0]
    assert lines[1].split()[:3] == ["mode", "KV", "alloc"]
    assert [line.split()[0] for line in lines[3:5]] == ["f16/f16", "q8_0/f16"]
    assert " - " in lines[3] or lines[3].rstrip().endswith("-")  # no quality asked: PPL is '-'
    # --plot is the one part that needs Qt: refused in one sentence, before measuring.
    plotted = subprocess.run(
        [sys.executable, "-c", NO_QT, *args, "--plot", str(tmp_path / "p.png")],
        capture_output=True,
        text=True,
        timeout=400,
        cwd=ROOT,
        env=env,
        check=False,
    )
    assert plotted.returncode == 2 and "needs PySide6" in plotted.stderr
    assert "Traceback" not in plotted.stderr
