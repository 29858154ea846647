"""The cancel flag shared by the client and the engine process, and llama.cpp's view of it.

One byte of shared memory: the client sets it, the engine reads it between tokens, and
llama.cpp reads it between graph nodes through its abort callback, so Stop also cuts a
token (or a prompt batch) short. The abort callback must be native code: a Python
callback would run under the GIL after every graph node (hundreds per token) and cost
several percent of decode speed. libc's strlen is used as that callback: called with the
flag's address it returns 0 while the byte is 0 and 1 once it is set, which llama.cpp
reads as the bool "abort".
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import multiprocessing
import sys
from _ctypes import CFuncPtr  # the type of a ctypes function object
from multiprocessing.context import BaseContext
from typing import Protocol

log = logging.getLogger(__name__)


class CancelCheck(Protocol):
    """What the engine's long work reads to learn it should stop: a CancelFlag, or a
    threading.Event where a test runs the work in-process."""

    def is_set(self) -> bool: ...


class CancelFlag:
    """A process-shared flag with Event's set/clear/is_set (picklable to a spawned child)."""

    def __init__(self, ctx: BaseContext | None = None) -> None:
        ctx = ctx or multiprocessing.get_context("spawn")
        self._byte = ctx.RawArray(ctypes.c_char, 2)  # the flag and a terminating NUL

    def set(self) -> None:
        self._byte[0] = b"\x01"

    def clear(self) -> None:
        self._byte[0] = b"\x00"

    def is_set(self) -> bool:
        flag: bytes = self._byte[0]  # a c_char item (typeshed leaves it untyped)
        return flag != b"\x00"

    @property
    def address(self) -> int:
        """Address of the flag byte in this process (valid while self lives)."""
        return ctypes.addressof(self._byte)


def native_abort_callback() -> CFuncPtr | None:
    """A native function usable as ggml_abort_callback reading a CancelFlag's byte, or
    None where libc's strlen cannot be found."""
    try:
        if sys.platform == "win32":
            strlen = ctypes.cdll.msvcrt.strlen
        else:
            strlen = ctypes.CDLL(ctypes.util.find_library("c") or None).strlen
    except (OSError, AttributeError):
        log.warning("no native abort callback: Stop takes effect between tokens only")
        return None
    import llama_cpp

    return ctypes.cast(strlen, llama_cpp.ggml_abort_callback)
