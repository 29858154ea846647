"""The heap helpers the engine and the window use to keep a days-long session from creeping up."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from app.platform import heap

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")

_PROBE = """
from app.platform import heap
print(",".join(heap.steady_heap()))
"""


def _settings_applied(env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def test_the_heap_settings_apply_unless_the_user_chose_them() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    assert _settings_applied(env) == "MALLOC_ARENA_MAX,MALLOC_MMAP_THRESHOLD_"
    assert _settings_applied(env | {"MALLOC_ARENA_MAX": "8"}) == "MALLOC_MMAP_THRESHOLD_"


def test_freed_heap_goes_back_to_the_system() -> None:
    """Many small blocks freed below one still in use stay in the process until trimmed."""
    import ctypes

    import psutil

    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(4096) for _ in range(40_000)]  # ~160 MiB of small blocks
    keep = libc.malloc(4096)  # on top of the heap: glibc cannot shrink past it by itself
    for block in blocks:
        libc.free(block)
    held = psutil.Process().memory_info().rss
    heap.give_memory_back()
    after = psutil.Process().memory_info().rss
    libc.free(keep)
    assert held - after > 100 * 2**20
