"""CI's packaging stage: build the Linux artifacts, then try them the way a user gets them.

    python packaging/check_linux.py [--out dist]

1. packaging/build.py --platform linux (the app, .tar.gz, .deb, AppDir, sizes.json);
2. the app folder is under the size budget (packaging/sizes.py);
3. the AppDir's AppRun passes `kvstudio selftest` with an empty environment, and
   `kvstudio worker` starts on the built-in backend (its rpc-server is shipped) and stops on Ctrl-C;
4. in a copy of a bare Debian 12 root (scripts/clean_root.sh; no Python, no project venv):
   `apt-get install ./kvstudio.deb` pulls in only its Depends, ldd then finds every library of
   every file, `kvstudio selftest` passes, the window opens offscreen and saves a screenshot, and
   after `apt-get remove kvstudio` the install folder is gone and the user's data folder is not.

Exits 1 with the failed step's sentence; prints each step's seconds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

from build import build  # noqa: E402
from sizes import BUDGET_MIB, MIB  # noqa: E402

CLEAN_ROOT_SCRIPT = HERE / "linux" / "check_in_clean_root.sh"
SELFTESTS = ("selftest.txt", "selftest-package.txt")  # built-in backend, then the added package


class CheckFailed(Exception):
    pass


def clean_root_base() -> Path:
    result = subprocess.run(
        [str(ROOT / "scripts" / "clean_root.sh")], capture_output=True, text=True
    )
    if result.returncode != 0:
        raise CheckFailed(f"making the clean Debian root failed: {result.stderr.strip()[-500:]}")
    return Path(result.stdout.strip().splitlines()[-1])


def run_in_root(root: Path, script: str) -> subprocess.CompletedProcess[str]:
    """The script in `root` through chroot, with /proc mounted in a private mount namespace
    (the app reads /proc/self/maps) so nothing stays mounted if the check is killed."""
    return subprocess.run(
        [
            "unshare", "--mount", "--fork", "sh", "-c",
            'mount -t proc proc "$1/proc" && exec chroot "$@"', "sh", str(root),
            "/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C.UTF-8",
            "sh", "-c", script,
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip


def check_deb(deb: Path, backend: Path, out: Path) -> str:
    base = clean_root_base()
    with tempfile.TemporaryDirectory(prefix="kvstudio-clean-root-", dir=base.parent) as tmp:
        root = Path(tmp) / "root"
        subprocess.run(["cp", "-a", str(base), str(root)], check=True)
        shutil.copy2(deb, root / "tmp" / "kvstudio.deb")
        shutil.copy2(backend, root / "tmp" / "backend.tar.gz")
        result = run_in_root(root, CLEAN_ROOT_SCRIPT.read_text())
        if result.returncode != 0:
            raise CheckFailed(f"the .deb in a clean Debian root: {result.stderr.strip()[-1500:]}")
        shutil.copy2(root / "tmp" / "window.png", out / "clean-root-window.png")
        lines = [(root / "tmp" / name).read_text().strip() for name in SELFTESTS]
        return "; then ".join(lines)


def check_appdir(appdir: Path) -> str:
    result = subprocess.run(
        ["env", "-i", "PATH=/usr/bin:/bin", f"HOME={tempfile.mkdtemp()}", str(appdir / "AppRun"),
         "selftest"],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    if result.returncode != 0:
        raise CheckFailed(f"AppRun selftest failed: {result.stderr.strip()[-800:]}")
    return result.stdout.strip()


def check_appdir_worker(appdir: Path) -> str:
    """The installed app is a worker as it is (docs/several-machines.md): AppRun worker prints
    its banner on the built-in backend, and Ctrl-C stops it."""
    from app.load.rpc_workers import free_port_pair

    port = free_port_pair()
    worker = subprocess.Popen(
        ["env", "-i", "PATH=/usr/bin:/bin", f"HOME={tempfile.mkdtemp()}", str(appdir / "AppRun"),
         "worker", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    watchdog = threading.Timer(120, worker.kill)  # a worker that never speaks ends the read
    watchdog.start()
    try:
        assert worker.stdout is not None
        banner = worker.stdout.readline().strip()  # the first line says where it listens
        expected = f"Worker listening at 127.0.0.1:{port} (backend built-in, rpc-server v"
        if not banner.startswith(expected):
            worker.kill()
            _, err = worker.communicate(timeout=60)
            raise CheckFailed(f"AppRun worker did not start: {(banner or err.strip())[-800:]}")
        worker.send_signal(signal.SIGINT)
        worker.communicate(timeout=60)
    finally:
        watchdog.cancel()
        if worker.poll() is None:
            worker.kill()
    if worker.returncode != 130:
        raise CheckFailed(f"AppRun worker ended with {worker.returncode} on Ctrl-C, not 130")
    return banner


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="packaging/check_linux.py")
    parser.add_argument("--out", type=Path, default=ROOT / "dist")
    out = parser.parse_args(argv).out.resolve()
    steps: dict[str, float] = {}
    started = time.monotonic()
    try:
        build("linux", out, [])
        steps["build"] = time.monotonic() - started
        shipped = [p.name for p in (out / "kvstudio").rglob("*") if "gemma3" in p.name]
        shipped += [p.name for p in (out / "kvstudio").rglob("*.gguf")]
        if shipped:
            raise CheckFailed(f"the app carries the starter model ({shipped[0]}); it must not")
        sizes = json.loads((out / "sizes.json").read_text())
        app_mib = sizes["kvstudio"]["unpacked_bytes"] / MIB
        if app_mib > BUDGET_MIB:
            raise CheckFailed(
                f"the app folder is {app_mib:.1f} MiB, over the {BUDGET_MIB} MiB budget"
            )
        mark = time.monotonic()
        appdir_line = check_appdir(out / "KVStudio.AppDir")
        worker_line = check_appdir_worker(out / "KVStudio.AppDir")
        steps["appdir"] = time.monotonic() - mark
        mark = time.monotonic()
        package = next((ROOT / "build" / "packaging" / "linux" / "backend").glob("*.tar.gz"))
        deb_line = check_deb(next(out.glob("kvstudio_*_amd64.deb")), package, out)
        steps["clean root"] = time.monotonic() - mark
    except CheckFailed as error:
        print(f"packaging check: {error}", file=sys.stderr)
        return 1
    print(f"packaging check: app {app_mib:.1f} MiB (budget {BUDGET_MIB}); AppDir: {appdir_line}")
    print(f"packaging check: AppDir worker: {worker_line}; stopped by Ctrl-C")
    print(f"packaging check: installed .deb in a clean Debian 12 root: {deb_line}")
    timing = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in steps.items())
    print(f"packaging check passed in {time.monotonic() - started:.0f} s ({timing})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
