"""The int8-K path in RDNA3 machine code: `python -m kernels isa-proof`, end to end.

On a machine without the Debian 13 hipcc root this makes it (about a minute; needs root and the
Debian mirror apt uses) and compiles the three FA vector-kernel instances for the rdna3 targets
(minutes on 2 cores); after that, cached objects only need disassembling, and one instance is
compiled afresh every run to keep that cache honest. Where the root cannot be made the tests fail
with the reason: the proof is the point of these tests, so it is never skipped.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import tomllib
from dataclasses import asdict
from pathlib import Path

import pytest

from kernels import isa_proof
from kernels.isa_report import (
    INSTRUCTION,
    FaVecKernel,
    fa_vec_kernel,
    is_int8_k,
    render_markdown,
    same_counts,
    scan,
    violations,
)
from kernels.patch_set import kernel_version
from kernels.variants import FA_PAIRS, LLAMA_CPP_PYTHON_VERSION
from tests.prebuilt import HIP_REPORT, compiled_in_this_run, prebuilt, run_isa_proof

ROOT = Path(__file__).resolve().parents[2]
DOCS_JSON = ROOT / "docs" / "int8k-isa-report.json"
DOCS_TABLE = ROOT / "docs" / "int8k-isa.md"
INT8_K = [p for p in FA_PAIRS if is_int8_k(p)]
CONTROLS = [p for p in FA_PAIRS if not is_int8_k(p)]
REGENERATE = "regenerate with `python -m kernels isa-proof` and commit docs/int8k-isa*"

# A fresh machine makes the root and compiles everything inside the first test's fixture.
pytestmark = pytest.mark.timeout(1800)


@pytest.fixture(scope="module")
def report_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What `python -m kernels isa-proof` writes in this run (cached objects where still valid):
    scripts/test_builds.py's report when it ran just before pytest."""
    report = prebuilt(HIP_REPORT)
    if report is None:
        report = tmp_path_factory.mktemp("isa") / HIP_REPORT
        if (failure := run_isa_proof(report)) is not None:
            pytest.fail(failure, pytrace=False)
    return report


@pytest.fixture(scope="module")
def report(report_file: Path) -> dict:
    return json.loads(report_file.read_text())


def _fa(entries: list[dict]) -> list[tuple[dict, FaVecKernel]]:
    return [(e, k) for e in entries if (k := fa_vec_kernel(e["demangled"]))]


def test_the_proof_covers_the_rdna3_build(report: dict) -> None:
    assert report["targets"] == ["gfx1100", "gfx1101", "gfx1102", "gfx1150", "gfx1151"]
    assert list(report["instances"]) == ["q8_0-f16", "q8_0-q8_0", "f16-f16"]
    assert report["llama_cpp_python"] == LLAMA_CPP_PYTHON_VERSION
    assert report["kernel"] == kernel_version()  # the kernels the rocm-rdna3 build ships


def test_the_patched_kernels_that_share_a_block_among_heads_use_it_too(report: dict) -> None:
    """Patches 0003/0004's kernels (Q heads of a GQA group per block, quantized K: 4 of 64 or 128,
    2 of 256) are compiled for RDNA3 as well and hold the int8 dot instruction, except the 64-wide
    softcap one, llama.cpp's trapping stub; the f16 control has none of them."""
    expected = [
        "D=128 ncols=1 heads=4",
        "D=128 ncols=1 heads=4 softcap",
        "D=256 ncols=1 heads=2",
        "D=256 ncols=1 heads=2 softcap",
        "D=64 ncols=1 heads=4",
        "D=64 ncols=1 heads=4 softcap",
    ]
    for target in report["targets"]:
        for pair in INT8_K:
            packed = [(e, k) for e, k in _fa(report["kernels"][target][pair]) if k.heads > 1]
            labels = sorted(k.label for _, k in packed)
            assert labels == expected, f"{target} {pair}: {labels}"
            for e, k in packed:
                if k.skipped_by_llama_cpp:
                    assert e["traps"], f"{target} {pair} {k.label} should be llama.cpp's stub"
                else:
                    assert e["count"] > 0 and not e["traps"], f"{target} {pair} {k.label}"
        control = _fa(report["kernels"][target]["f16-f16"])
        assert [k for _, k in control if k.heads > 1] == [], target


def test_every_q8_0_k_kernel_holds_the_int8_dot_instruction(report: dict) -> None:
    for target in report["targets"]:
        for pair in INT8_K:
            fa = _fa(report["kernels"][target][pair])
            real = [(e, k) for e, k in fa if not k.skipped_by_llama_cpp]
            assert real, f"{target} {pair}: no flash_attn_ext_vec kernel was found"
            for e, k in fa:
                assert k.k_type == "q8_0", e["demangled"]
                if k.skipped_by_llama_cpp:
                    assert e["traps"], (
                        f"{target} {pair} {k.label} should be llama.cpp's trapping stub"
                    )
                else:
                    assert not e["traps"], f"{target} {pair} {k.label} traps"
                    assert e["count"] > 0, f"{target} {pair} {k.label}: no {INSTRUCTION}"


def test_the_f16_control_holds_none(report: dict) -> None:
    for target in report["targets"]:
        for pair in CONTROLS:
            entries = report["kernels"][target][pair]
            assert _fa(entries), f"{target} {pair}: no flash_attn_ext_vec kernel was found"
            with_it = [e["demangled"] for e in entries if e["count"]]
            assert not with_it, f"{target} {pair}: {INSTRUCTION} in {with_it}"


def test_the_report_judges_the_same(report: dict) -> None:
    assert violations(report) == []
    assert report["ok"] is True and report["violations"] == []


def test_the_docs_report_is_this_run(report: dict) -> None:
    docs = json.loads(DOCS_JSON.read_text())
    # The toolchain's Debian revisions may move on a newly made root; what was found may not.
    for key in (
        "llama_cpp_python",
        "sdist_sha256",
        "compiler_flags",
        "targets",
        "instances",
        "kernels",
        "kernel",
        "ok",
    ):
        assert docs[key] == report[key], (
            f"docs/int8k-isa-report.json differs in {key!r}: {REGENERATE}"
        )


def test_the_docs_table_is_rendered_from_the_docs_report() -> None:
    assert DOCS_TABLE.read_text() == render_markdown(json.loads(DOCS_JSON.read_text())), REGENERATE


def test_a_fresh_compile_matches_the_cached_objects(report: dict, report_file: Path) -> None:
    """Compiled now, never cached: a stale or damaged object cache cannot pass for the real
    thing. When this run's proof compiled the instance itself (a fresh machine), its counts
    already are a fresh compile of these sources, and a second compile would prove nothing."""
    cached = report["kernels"]["gfx1100"]["q8_0-f16"]
    if "q8_0-f16" in compiled_in_this_run(report_file):
        fresh = cached
    else:
        try:
            counts = isa_proof.compile_fresh(None, "q8_0-f16", "gfx1100", log=lambda line: None)
        except isa_proof.IsaProofError as error:
            pytest.fail(str(error), pytrace=False)
        fresh = [asdict(k) for k in counts]
    assert same_counts(fresh, cached)
    assert sum(k["count"] for k in fresh) > 0


# The checker must fail when the claim is false. These feed it the real report, altered.


def test_a_control_with_the_instruction_fails(report: dict) -> None:
    """The real q8_0-f16 kernels, declared a control: the checker must object to each one."""
    bad = copy.deepcopy(report)
    bad["instances"]["q8_0-f16"]["role"] = "control"
    found = violations(bad)
    expected = sum(1 for t in bad["targets"] for e in bad["kernels"][t]["q8_0-f16"] if e["count"])
    assert expected > 0
    assert len([v for v in found if "control kernel" in v and INSTRUCTION in v]) == expected


def test_a_q8_0_kernel_without_the_instruction_fails(report: dict) -> None:
    bad = copy.deepcopy(report)
    entry = next(e for e, k in _fa(bad["kernels"]["gfx1151"]["q8_0-q8_0"]) if e["count"])
    entry["count"] = 0
    assert violations(bad) == [
        f"gfx1151 q8_0-q8_0: int8-K kernel {_label(entry)} has no {INSTRUCTION}."
    ]


def test_a_stub_must_really_trap_and_only_where_llama_cpp_skips(report: dict) -> None:
    not_trapping = copy.deepcopy(report)
    stub = next(
        e for e, k in _fa(not_trapping["kernels"]["gfx1100"]["q8_0-f16"]) if k.skipped_by_llama_cpp
    )
    stub["traps"] = False
    assert violations(not_trapping) == [
        f"gfx1100 q8_0-f16: int8-K kernel {_label(stub)} has no {INSTRUCTION}."
    ]

    trapping = copy.deepcopy(report)
    real = next(
        e for e, k in _fa(trapping["kernels"]["gfx1100"]["q8_0-f16"]) if not k.skipped_by_llama_cpp
    )
    real["traps"], real["count"] = True, 0
    assert violations(trapping) == [
        f"gfx1100 q8_0-f16: kernel {_label(real)} traps though llama.cpp does not skip it."
    ]


def test_an_instance_without_kernels_fails(report: dict) -> None:
    bad = copy.deepcopy(report)
    bad["kernels"]["gfx1102"]["f16-f16"] = []
    assert violations(bad) == ["gfx1102 f16-f16: no flash_attn_ext_vec kernel for K=f16, V=f16."]


def _label(entry: dict) -> str:
    k = fa_vec_kernel(entry["demangled"])
    assert k is not None
    return f"flash_attn_ext_vec {k.label} K={k.k_type} V={k.v_type}"


def test_scan_counts_the_mnemonic_only() -> None:
    lines = [
        "x.co:\tfile format elf64-amdgpu",
        "0000000000001000 <.text>:",
        "\ts_code_end                                  // 000000001000: BF9F0000",
        "0000000000001100 <_Z1av>:",
        "\tv_dot4_i32_iu8 v1, v2, v3, 0 neg_lo:[1,1,0]  // 000000001100: CC16403B 7A02013C",
        "\tv_add_nc_u32_e32 v1, v1, v2                 // v_dot4_i32_iu8 in a comment",
        "\tv_dot4_i32_iu8 v4, v2, v3, v4 neg_lo:[1,1,0]",
        "0000000000001200 <_Z14v_dot4_i32_iu8v>:",
        "\ts_trap 2",
        "\ts_endpgm",
    ]
    assert scan("\n".join(lines)) == {"_Z1av": (2, False), "_Z14v_dot4_i32_iu8v": (0, True)}
    # An instruction in padding before any function is not lost.
    assert scan("0000 <.text>:\n\tv_dot4_i32_iu8 v1, v2, v3, 0") == {".text": (1, False)}


def test_the_version_is_pinned_in_one_place() -> None:
    """kernels.variants.LLAMA_CPP_PYTHON_VERSION is the pin; the install files must agree with
    it."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = [d for d in deps if d.startswith("llama-cpp-python")]
    assert pins == [f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}"]
    quickstart = re.findall(r"llama-cpp-python==([0-9.]+)", (ROOT / "quickstart.sh").read_text())
    assert quickstart and set(quickstart) == {LLAMA_CPP_PYTHON_VERSION}


def test_bad_targets_are_refused_in_one_sentence() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kernels", "isa-proof", "--targets", "sm_90"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr == "kernels: not an AMD GPU target (like gfx1100): sm_90.\n"
