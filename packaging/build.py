"""Build KV Studio's installable artifacts into dist/.

    python packaging/build.py --platform linux [--backend VARIANT ...] [--out dist]

linux: the one-folder app (PyInstaller, packaging/kvstudio.spec) with the portable CPU backend
inside, then kvstudio-VERSION-linux-x86_64.tar.gz, kvstudio_VERSION_amd64.deb, KVStudio.AppDir
and sizes.json. windows: the one-folder app and the NSIS installer. macos: KV Studio.app (the
.dmg is made by .github/workflows/macos.yml with hdiutil). --backend VARIANT also builds that GPU
backend's package archive (python -m kernels package) beside them: GPU backends are separate
downloads the user installs from within the app.

Run it from the project's venv with the `package` extra installed (pip install -e .[package]).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

from app import __version__  # noqa: E402

from sizes import write_size_report  # noqa: E402

PLATFORMS = ("linux", "windows", "macos")


def say(message: str) -> None:
    print(f"build: {message}", file=sys.stderr, flush=True)


def builtin_backend(work: Path) -> Path:
    """The portable CPU package's folder (built, or relinked from the cached CMake build)."""
    from kernels.package import build_package
    from kernels.variants import VARIANTS

    return build_package(VARIANTS["cpu"], work / "backend", log=say)


def freeze(platform: str, backend: Path, work: Path) -> Path:
    """PyInstaller's one-folder app; returns its folder (macOS: the .app)."""
    env = dict(os.environ, KVSTUDIO_PLATFORM=platform, KVSTUDIO_BUILTIN_BACKEND=str(backend))
    dist = work / "pyinstaller-dist"
    command = [
        sys.executable,
        "-m",
        "PyInstaller",
        "--noconfirm",
        "--clean",
        "--log-level",
        "WARN",
        "--workpath",
        str(work / "pyinstaller-work"),
        "--distpath",
        str(dist),
        str(HERE / "kvstudio.spec"),
    ]
    log = work / "pyinstaller.log"
    with log.open("w") as out:
        if subprocess.call(command, env=env, stdout=out, stderr=subprocess.STDOUT) != 0:
            tail = log.read_text(errors="replace").splitlines()[-5:]
            raise SystemExit(
                "build: PyInstaller failed (log: {}):\n{}".format(log, "\n".join(tail))
            )
    return dist / ("KV Studio.app" if platform == "macos" else "kvstudio")


def gpu_backend(variant: str, out: Path) -> Path:
    from kernels.package import archive_name, build_package
    from kernels.variants import VARIANTS

    if variant not in VARIANTS:
        raise SystemExit(f"build: no backend variant '{variant}' (python -m kernels variants).")
    build_package(VARIANTS[variant], out / "backends", log=say)
    return out / "backends" / archive_name(variant)


def build(platform: str, out: Path, backends: list[str]) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    work = ROOT / "build" / "packaging" / platform
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    backend = builtin_backend(work)
    say(f"freezing the app with PyInstaller ({platform})...")
    app = freeze(platform, backend, work)
    artifacts: list[Path] = []
    if platform == "linux":
        from linux_artifacts import make_appdir, make_deb, make_tarball

        final = out / "kvstudio"
        shutil.rmtree(final, ignore_errors=True)
        shutil.copytree(app, final, symlinks=True)
        say("writing the .tar.gz, .deb and AppDir...")
        artifacts += [
            final,
            make_tarball(final, __version__, out),
            make_deb(final, __version__, out, work),
            make_appdir(final, out),
        ]
    elif platform == "windows":
        from windows_installer import build_installer

        final = out / "kvstudio"
        shutil.rmtree(final, ignore_errors=True)
        shutil.copytree(app, final)
        setup = (
            out / f"KVStudio-{__version__}-windows-x64.exe"
        )  # "setup" in the name draws NSIS warning 9000
        artifacts += [final, build_installer(final, __version__, setup)]
    else:
        final = out / app.name
        shutil.rmtree(final, ignore_errors=True)
        shutil.copytree(app, final, symlinks=True)
        artifacts.append(final)
    artifacts += [gpu_backend(variant, out) for variant in backends if variant != "cpu"]
    write_size_report(artifacts, out / "sizes.json")
    say(f"done in {time.monotonic() - started:.0f} s: " + ", ".join(p.name for p in artifacts))
    return artifacts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="packaging/build.py", description=__doc__.split("\n")[0])
    parser.add_argument("--platform", required=True, choices=PLATFORMS)
    parser.add_argument(
        "--backend",
        action="append",
        default=[],
        metavar="VARIANT",
        help="also build this GPU backend's package (cpu is always inside the app)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "dist")
    args = parser.parse_args(argv)
    host = {"linux": "linux", "win32": "windows", "darwin": "macos"}.get(sys.platform)
    if args.platform != host:
        print(
            f"build: a {args.platform} app is built on {args.platform} (this is {sys.platform}); "
            "PyInstaller does not cross-compile.",
            file=sys.stderr,
        )
        return 2
    build(args.platform, args.out.resolve(), args.backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
