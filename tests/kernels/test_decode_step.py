"""The decode-step profile prepared for the H200 (docs/kernel-log.md, N): the script that times
one decode step and brackets more for Nsight Compute runs the real llama.cpp on the real starter
model here (no GPU: it says it ran them unbracketed), refuses bad input with one sentence, and
the summary adds Nsight's kernel times up by kernel family and mode, a step at a time."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "scripts" / "decode_step_profile.py"
KERNELS = ROOT / "scripts" / "decode_step_kernels.py"


def _run(script: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), *args], cwd=ROOT, capture_output=True, text=True,
        timeout=300, check=False, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def test_a_real_decode_step_is_timed_at_the_depth_asked(
    starter_model_path: Path, tmp_path: Path
) -> None:
    out = tmp_path / "step.json"
    result = _run(
        PROFILE, str(starter_model_path), "--kv", "q8_0/q8_0", "--depth", "300",
        "--tokens", "5", "--profile", "1", "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    step = json.loads(out.read_text())
    assert (step["mode"], step["depth"], step["n_ctx"]) == ("q8_0/q8_0", 300, 2348)
    assert len(step["ms_each"]) == 5 and all(ms > 0 for ms in step["ms_each"])
    assert step["ms_per_token"] == round(statistics.median(step["ms_each"]), 4)
    assert step["cuda_driver"] == ""  # no GPU here: nothing to bracket
    assert "No CUDA driver in this process: the profiled decodes ran unbracketed." in result.stderr


def test_bad_input_gets_one_sentence_and_exit_2(starter_model_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "step.json"
    model = str(starter_model_path)
    bad_mode = _run(PROFILE, model, "--kv", "q9/f16", "--out", str(out))
    assert bad_mode.returncode == 2 and "q9" in bad_mode.stderr
    too_deep = _run(PROFILE, model, "--depth", "4000", "--ctx", "4096", "--tokens", "200",
                    "--out", str(out))  # fmt: skip
    assert too_deep.returncode == 2
    assert too_deep.stderr.strip() == "Depth 4000 and the decodes do not fit 4096 tokens."
    assert not out.exists()
    usage = _run(KERNELS, "only-one-file.csv")
    assert usage.returncode == 2 and usage.stderr.startswith("usage:")


# Nsight Compute's --csv header and rows (as run 31's raw files hold them), each line with the
# build and the mode put first, as fa_prompt_run.sh's step:N writes them.
_HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
    '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
)


def _row(build: str, mode: str, i: int, kernel: str, unit: str, value: str) -> str:
    return (
        f'{build},{mode},"{i}","9885","python3","127.0.0.1","{kernel}","1","14","(32, 4, 1)",'
        f'"(1, 33, 8)","0","9.0","Command line profiler metrics","gpu__time_duration.sum",'
        f'"{unit}","{value}"'
    )


def test_the_summary_adds_kernel_times_by_family_and_mode(tmp_path: Path) -> None:
    fa = "void flash_attn_ext_vec<128, 1, 4, 8, 8, 0, 0>(const char *, const char *, float, int)"
    mmv = "void mul_mat_vec<__half, __half, 1>(const __half *, const float *, float *, int)"
    set_rows = "void k_set_rows_quant<block_q8_0, 32>(const float *, const long *, int)"
    lines = [f"7,f16/f16,{_HEADER}"]
    for step in range(2):  # two profiled decodes a mode
        lines += [
            _row("7", "f16/f16", 2 * step, fa, "usecond", "62.80"),
            _row("7", "f16/f16", 2 * step + 1, mmv, "usecond", "100.00"),
            _row("7", "q8_0/q8_0", 3 * step, fa, "usecond", "38.20"),
            _row("7", "q8_0/q8_0", 3 * step + 1, mmv, "usecond", "100.00"),
            _row("7", "q8_0/q8_0", 3 * step + 2, set_rows, "nsecond", "2,000"),
        ]
    ncu = tmp_path / "ncu-step-7.csv"
    ncu.write_text("\n".join(lines) + "\n")
    walls = tmp_path / "step-7.jsonl"
    walls.write_text(
        json.dumps({"mode": "f16/f16", "ms_per_token": 0.5})
        + "\n"
        + json.dumps({"mode": "q8_0/q8_0", "ms_per_token": 0.4})
        + "\n"
    )
    result = _run(KERNELS, str(ncu), str(walls), "2")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "7 f16/f16: 2 kernels, GPU 0.163 ms a step, wall 0.500 ms a token: GPU busy 33%",
        "7 q8_0/q8_0: 3 kernels, GPU 0.140 ms a step, wall 0.400 ms a token: GPU busy 35%",
        "kernel family | f16/f16 | q8_0/q8_0",
        "mul_mat_vec | 100.0 | 100.0",
        "flash_attn_ext_vec | 62.8 | 38.2",
        "k_set_rows_quant | 0.0 | 2.0",
    ]
