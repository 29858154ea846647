"""Publish packages the way .github/workflows/release.yml does, with scripts/release.py itself:
a new release key, each archive signed with it and given the release's version, and
backends.json written for a base URL (a ReleaseServer's)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def release(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python scripts/release.py ARGS`; `env` adds to this process's environment."""
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "release.py"), *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )


def publish(archives: list[Path], assets: Path, base_url: str, version: str) -> Path:
    """Sign `archives` into `assets` and index them; returns the file of the release key's public
    line (what KVSTUDIO_DEV_TRUSTED_KEYS names to trust it)."""
    key = assets.parent / f"release-key-{version}.pem"
    made = release("keygen", "--out", str(key), "--name", f"test-release-{version}")
    assert made.returncode == 0, made.stderr
    keys = assets.parent / f"trusted-{version}.txt"
    keys.write_text(made.stdout)
    pem = {"KVSTUDIO_RELEASE_KEY": key.read_text()}
    signed = release(
        "sign", *map(str, archives), "--version", version, "--out", str(assets), env=pem
    )
    assert signed.returncode == 0, signed.stderr
    published = [assets / a.name for a in archives]
    index = assets / "backends.json"
    indexed = release("index", *map(str, published), "--base-url", base_url, "--out", str(index))
    assert indexed.returncode == 0, indexed.stderr
    return keys
