"""Catch the app reaching for the network: every IP connection, UDP send and name lookup that
Python code tries is recorded and fails with NetworkForbiddenError (nothing leaves the machine).
Pipes and Unix sockets (the engine's, a test load's) still work. Registered for every test in
tests/conftest.py.

- `network_attempts`: the guard in this process; the list of what was tried.
- `child_network_attempts`: the same guard in every Python process started after it (the
  engine is a multiprocessing spawn child, which the in-process guard cannot see), through a
  sitecustomize module on PYTHONPATH; a ChildGuard reading what the children tried and which
  children had the guard.
- `inet_sockets(pid)`: the IP sockets a process holds open now, as the kernel lists them
  (psutil); sees sockets opened by C code too, but only those still open.

What no guard here sees: a connection opened and closed again by C code (llama.cpp, Qt)
without Python's socket module.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
INET = (socket.AF_INET, socket.AF_INET6)
Record = Callable[[str], None]


class NetworkForbiddenError(RuntimeError):
    """Not an OSError on purpose: HTTP clients retry a refused connection with back-off (and
    would try again after the test), but let any other error through at once."""


def install_guard(record: Record) -> Callable[[], None]:
    """Patch the socket module so each IP attempt is passed to `record` and then fails.
    Returns the function that puts the real ones back."""
    real: dict[str, Callable[..., Any]] = {
        "connect": socket.socket.connect,
        "connect_ex": socket.socket.connect_ex,
        "sendto": socket.socket.sendto,
    }
    real_getaddrinfo = socket.getaddrinfo

    def refuse(what: str) -> NetworkForbiddenError:
        record(what)
        return NetworkForbiddenError(f"a test forbids this network attempt: {what}")

    def guarded(name: str) -> Callable[..., Any]:
        def method(self: socket.socket, *args: Any) -> Any:
            if self.family in INET:
                raise refuse(f"{name} {args[-1]!r}")  # the address is the last argument
            return real[name](self, *args)

        return method

    def getaddrinfo(host: object, *args: Any, **kwargs: Any) -> Any:
        raise refuse(f"getaddrinfo {host!r}")

    for name in real:
        setattr(socket.socket, name, guarded(name))
    socket.getaddrinfo = getaddrinfo

    def undo() -> None:
        for name, method in real.items():
            setattr(socket.socket, name, method)
        socket.getaddrinfo = real_getaddrinfo

    return undo


@pytest.fixture
def network_attempts() -> Iterator[list[str]]:
    """What this process tried while the test ran (each attempt failed)."""
    attempts: list[str] = []
    undo = install_guard(attempts.append)
    yield attempts
    undo()


_SITECUSTOMIZE = """\
# Written by tests/network_guard.py: a Python child records its network attempts in a file.
import os

from tests.network_guard import install_guard


def _append(path, line):
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\\n")


install_guard(lambda what: _append({attempts!r}, what))
_append({pids!r}, str(os.getpid()))
"""


class ChildGuard:
    """The guard in the Python children: what they tried, and which children had it."""

    def __init__(self, folder: Path) -> None:
        self._attempts = folder / "attempts.txt"
        self._pids = folder / "guarded-pids.txt"
        self._attempts.touch()
        self._pids.touch()
        (folder / "sitecustomize.py").write_text(
            _SITECUSTOMIZE.format(attempts=str(self._attempts), pids=str(self._pids))
        )

    def attempts(self) -> list[str]:
        return self._attempts.read_text(encoding="utf-8").splitlines()

    def guarded_pids(self) -> set[int]:
        return {int(line) for line in self._pids.read_text(encoding="utf-8").split()}


@pytest.fixture
def child_network_attempts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ChildGuard:
    """Puts the guard in every Python child started from now on (through `site`, which
    multiprocessing's spawn runs); `guarded_pids()` tells a test its child really had it."""
    folder = tmp_path / "child-guard"
    folder.mkdir()
    guard = ChildGuard(folder)
    path = os.pathsep.join(p for p in (str(folder), str(ROOT), os.environ.get("PYTHONPATH")) if p)
    monkeypatch.setenv("PYTHONPATH", path)
    return guard


def inet_sockets(pid: int) -> list[str]:
    """The IP sockets process `pid` holds open, as 'status local -> remote'."""
    return [
        f"{c.status} {c.laddr} -> {c.raddr}"
        for c in psutil.Process(pid).net_connections(kind="inet")
    ]
