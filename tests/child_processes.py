"""The processes a test started and left running, told apart from multiprocessing's resource
tracker: that helper starts the first time this test process makes an engine's cancel flag and
stays for the process's life, so whether it appears during a test depends only on which test
happened to run first in this worker (tests ran alone pass, the same test after another
module's engine passes, the same test first in its worker would not)."""

from __future__ import annotations

import psutil


def running_children() -> set[int]:
    """Pids of this process's running descendants, the resource tracker left out."""
    pids = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                continue
            if "multiprocessing.resource_tracker" in " ".join(child.cmdline()):
                continue
        except psutil.NoSuchProcess:
            continue
        pids.add(child.pid)
    return pids
