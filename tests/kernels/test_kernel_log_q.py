"""Kernel log Q (session 47, no GPU): what it says of the candidates' machine code and of their
builds is what the recorded files hold."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from kernels.isa_report import fa_vec_kernel
from tests.kernels.candidates import LOG, ROOT
from tests.kernels.kernel_log_tables import section


def _q_text() -> str:
    return " ".join(section("Q").split())


def test_section_q_says_the_registers_ptxas_gave_the_new_kernels() -> None:
    """Q's register counts are those in the recorded ptxas output, without local memory."""
    ptxas = (LOG / "2026-12-05-scale-fwht-ptxas.txt").read_text()
    registers = {
        int(width): int(count)
        for width, count in re.findall(
            r"_Z9rope_fwhtILi(\d+)ELb0ELb0ELb0ELb1Ef\S* for 'sm_90'\n.*\n.*\n"
            r".*Used (\d+) registers",
            ptxas,
        )
    }
    assert sorted(registers) == [64, 128, 256]
    assert ptxas.count("0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads") == 3
    said = "the three new kernels {}, {} and {} registers, no local memory"
    assert said.format(registers[64], registers[128], registers[256]) in _q_text()


def test_section_q_names_the_only_new_symbols_the_link_check_found() -> None:
    record = (LOG / "2026-12-05-link-check.txt").read_text()
    new: dict[str, list[str]] = {}
    for block in record.split("## ")[1:]:
        title, *lines = block.strip().splitlines()
        if "new against fa.7" in title:
            new[title.split(",")[0]] = lines
    assert new == {
        "sm_90": ["__cxa_thread_atexit"],
        "gfx1100": ["__cxa_thread_atexit", "__tls_get_addr"],
    }
    assert "for sm_90 (nvcc 13.0) only `__cxa_thread_atexit` is new" in _q_text()
    assert "for gfx1100 (HIP 6.4" in _q_text() and "also `__tls_get_addr`" in _q_text()
    whole = record[record.index("## gfx1100, F+G+H+I: the whole library") :]
    assert "rc=0 478 s" in whole and "no undefined symbol, no library not found" in whole
    assert "for gfx1100 alone (478 s on 2 cores): it builds, and `ldd -r` finds every" in _q_text()
    cuda = record[record.index("## sm_90, F+G+H+I: the whole build") :]
    assert "ggml-cuda -j2: rc=0 1015 s" in cuda and "test-backend-ops llama -j2: rc=0 169 s" in cuda
    assert "no undefined symbol" in cuda and "26/26 tests passed" in cuda
    assert "libggml-cuda built in 1,015 s, test-backend-ops and libllama in 169 s more" in _q_text()


def _vec_kernels(path: Path, pair: str) -> dict[str, int]:
    """An isa-count record's flash_attn_ext_vec kernels of `pair`: label -> IDP.4A count."""
    report: dict[str, Any] = json.loads(path.read_text())["reports"][0]
    counts = {}
    for entry in report["kernels"]["sm_90"][pair]:
        kernel = fa_vec_kernel(entry["demangled"])
        assert kernel is not None
        counts[kernel.label] = entry["count"]
    return counts


def test_the_candidates_build_holds_fa7s_int8_kernels_and_hs_variants() -> None:
    """The whole sm_90 library built here with F, G, H and I: q8_0/f16's vector kernels are fa.7's
    package's, count for count (every one now ends in H's variant 0); q8_0/q8_0 has them too, and
    H's variants 1 and 2 of its two 4-head kernels, 128 IDP.4A each."""
    fa7 = ROOT / "docs" / "kernel-e2e"
    for pair in ("q8_0-f16", "q8_0-q8_0"):
        before = _vec_kernels(fa7 / f"isa-count-fa7-sm90-{pair}.json", pair)
        after = _vec_kernels(LOG / f"2026-12-05-candidates-isa-count-{pair}.json", pair)
        assert {f"{label} 0": n for label, n in before.items()} == {
            label: n for label, n in after.items() if label.endswith(" 0")
        }
        variants = {label: n for label, n in after.items() if not label.endswith(" 0")}
        if pair == "q8_0-f16":
            assert not variants
        else:
            heads4 = "D=128 ncols=1 heads=4"
            assert variants == {
                f"{heads4} 1": 128, f"{heads4} 2": 128,
                f"{heads4} long-kv 1": 128, f"{heads4} long-kv 2": 128,
            }  # fmt: skip
        total = sum(after.values())
        assert f"{len(after)} kernels and {total:,} IDP.4A" in _q_text()
