"""The C heap of our processes (glibc on Linux): a steady heap, and free pages handed back.

A process that loads and unloads models for days must not creep up in resident memory while
using no more. Two glibc habits made it creep in the soak benchmark (benchmarks/long_session.py):
- each thread that allocates gets its own arena (up to 8 per core), and arenas rarely give free
  pages back: the engine grew 5.8% over 50 load/reply/unload cycles, 2.0% with two arenas;
- the mmap threshold moves: once a large block that was mmap'ed is freed, glibc raises the
  threshold, so later blocks of that size come from the heap, where they fragment it. With two
  arenas the engine still grew 4.3% over 30 cycles (tiny model; then flat); with the threshold
  fixed at glibc's own starting value, 0.5%.
The window applies both with mallopt; the engine gets them as environment variables, so they
hold from its first allocation. A user's own MALLOC_* settings win. Nothing here does anything
where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import os
import sys

# mallopt parameters, from glibc's malloc.h
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
ARENAS = 2
MMAP_THRESHOLD = 128 * 1024  # glibc's default start; setting it stops it from moving
# The same, as the environment variables glibc reads when a process starts.
STEADY_HEAP_ENV = {
    "MALLOC_ARENA_MAX": str(ARENAS),
    "MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD),
}


def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.malloc_trim  # noqa: B018 - only glibc has it (musl has none)
        libc.mallopt  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def steady_heap_env() -> dict[str, str]:
    """Environment for a child process: our heap settings where the user set none."""
    return {name: os.environ.get(name) or value for name, value in STEADY_HEAP_ENV.items()}


def steady_heap() -> list[str]:
    """Apply the heap settings to this process from now on; returns the names of those set
    here (a setting the user gave through the environment is left alone)."""
    libc = _glibc()
    if libc is None:
        return []
    libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    applied = []
    for name, parameter, value in (
        ("MALLOC_ARENA_MAX", _M_ARENA_MAX, ARENAS),
        ("MALLOC_MMAP_THRESHOLD_", _M_MMAP_THRESHOLD, MMAP_THRESHOLD),
    ):
        if not os.environ.get(name) and libc.mallopt(parameter, value):
            applied.append(name)
    return applied


def give_memory_back() -> None:
    """Return freed heap pages to the system (after a model was closed, say)."""
    libc = _glibc()
    if libc is None:
        return
    libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
    libc.malloc_trim(0)
