"""In a linked libggml-hip.so, llama.cpp's NO_DEVICE_CODE stubs are kernels that call one shared
`no_device_code` function (which holds the s_trap) instead of inlining it: the scanner follows the
call, so those stubs count as trapping, and real kernels keep their v_dot4_i32_iu8 counts. The
fixture is an excerpt of the real listing from the rocm-rdna3 package built on 2026-12-01."""

from __future__ import annotations

from pathlib import Path

from kernels.isa_report import scan

LISTING = (Path(__file__).parent / "fixtures" / "linked-hip-stub-gfx1100.txt").read_text()
STUB = "_ZL18flash_attn_ext_vecILi64ELi1EL9ggml_type8ELS0_1ELb1E"  # D=64, softcap: not compiled
KERNEL = "_ZL18flash_attn_ext_vecILi64ELi1EL9ggml_type8ELS0_1ELb0E"  # D=64, no softcap


def _entry(found: dict[str, tuple[int, bool]], prefix: str) -> tuple[int, bool]:
    return next(v for s, v in found.items() if s.startswith(prefix))


def test_a_stub_that_calls_the_trapping_function_traps():
    found = scan(LISTING, "v_dot4_i32_iu8")
    assert _entry(found, STUB) == (0, True)
    assert _entry(found, "_ZL14no_device_code") == (0, True)


def test_real_kernels_keep_their_count_and_do_not_trap():
    assert _entry(scan(LISTING, "v_dot4_i32_iu8"), KERNEL) == (16, False)


def test_without_the_call_the_stub_would_not_trap():
    no_call = "\n".join(line for line in LISTING.splitlines() if "s_swappc_b64" not in line)
    assert _entry(scan(no_call, "v_dot4_i32_iu8"), STUB) == (0, False)
