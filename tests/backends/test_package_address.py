"""`kvstudio backend add URL`: the real signed CPU package, published on 127.0.0.1, downloaded
and added through the same checks as a file; on a terminal the download shows its progress on
one line that ends before the result, and the download folder is gone afterwards."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from app.backends.store import BackendStore
from tests.backends.release_server import ReleaseServer

ROOT = Path(__file__).resolve().parents[2]


def run_on_a_terminal(*args: str) -> tuple[int, str, str]:
    """`kvstudio ARGS` with stderr on a pseudo-terminal (as in a shell) and stdout piped:
    (exit status, stdout, what the terminal showed)."""
    leader, follower = os.openpty()
    child = subprocess.Popen(
        [sys.executable, "-m", "app", *args],
        stdout=subprocess.PIPE,
        stderr=follower,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    os.close(follower)
    shown = bytearray()
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal's last writer
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert child.stdout is not None
    out = child.stdout.read().decode()
    return child.wait(timeout=300), out, shown.decode(errors="replace")


def test_backend_add_of_an_address_downloads_with_progress_and_adds_it(
    cpu_package: Path, data_folder: Path, tmp_path: Path
) -> None:
    assets = tmp_path / "assets"
    assets.mkdir()
    shutil.copy(cpu_package, assets / cpu_package.name)
    with ReleaseServer(assets) as server:
        status, out, shown = run_on_a_terminal("backend", "add", f"{server.url}/{cpu_package.name}")
    assert status == 0, shown
    assert out == "Added the cpu backend; switch with `kvstudio backend use cpu`.\n"
    assert [method for method, _name, _range in server.log] == ["HEAD", "GET"]
    megabytes = cpu_package.stat().st_size / (1 << 20)
    assert f"\r{cpu_package.name}: 100% of {megabytes:.2f} MiB" in shown, shown
    assert shown.endswith("\r\n")  # the line ends: the shell's prompt starts on a line of its own
    backends = BackendStore(data_folder)
    assert [b.name for b in backends.installed() if b.folder is not None] == ["cpu"]
    assert not [p.name for p in backends.folder.iterdir() if p.name.startswith(".download")]
