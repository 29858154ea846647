"""A child program (llama.cpp's rpc-server) that must not outlive the process that started it."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with(parent: int) -> Callable[[], None] | None:
    """A preexec_fn that makes rpc-server die when this process does, even by SIGKILL (no
    handler of ours runs then): Linux's parent-death signal. Elsewhere, None."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)  # looked up before the fork

    def set_death_signal() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the prctl took effect
            os._exit(1)

    return set_death_signal
