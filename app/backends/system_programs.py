"""The environment for running the system's own programs (ldd, vulkaninfo, sysctl) from the app.

A frozen app's launcher (PyInstaller) puts the app's library folder first on LD_LIBRARY_PATH and
keeps the user's own value in LD_LIBRARY_PATH_ORIG. A system program started with that would load
the app's copies of libraries (libstdc++, libX11...) instead of the system's: ldd would even report
a library the system lacks as found.
"""

from __future__ import annotations

import os
import sys


def system_env() -> dict[str, str]:
    """os.environ as the user's session had it, for a child that is a system program."""
    env = dict(os.environ)
    if getattr(sys, "frozen", False):
        original = env.pop("LD_LIBRARY_PATH_ORIG", None)
        if original is None:
            env.pop("LD_LIBRARY_PATH", None)
        else:
            env["LD_LIBRARY_PATH"] = original
    return env
