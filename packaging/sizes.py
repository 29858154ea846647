"""How big each artifact is, packed and unpacked, and the budget the Linux app must stay under."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

BUDGET_MIB = 250  # the Linux CPU app without the model, unpacked
MIB = 1 << 20


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def unpacked_bytes(artifact: Path) -> int:
    if artifact.is_dir():
        return folder_bytes(artifact)
    if artifact.name.endswith(".tar.gz"):
        with tarfile.open(artifact) as tar:
            return sum(m.size for m in tar.getmembers() if m.isfile())
    if artifact.suffix == ".deb":
        control = _deb_field(artifact, "Installed-Size")
        return int(control) * 1024
    return artifact.stat().st_size


def _deb_field(deb: Path, field: str) -> str:
    import subprocess

    return subprocess.run(
        ["dpkg-deb", "--field", str(deb), field], capture_output=True, text=True, check=True
    ).stdout.strip()


def write_size_report(artifacts: list[Path], target: Path) -> dict[str, dict[str, int]]:
    report = {
        a.name: {
            "bytes": folder_bytes(a) if a.is_dir() else a.stat().st_size,
            "unpacked_bytes": unpacked_bytes(a),
        }
        for a in artifacts
    }
    target.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    return report
