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


# ---- the recorded sizes in docs/install.md --------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "docs" / "packaging-sizes.json"
PAGE = ROOT / "docs" / "install.md"
BEGIN = "<!-- sizes table: python packaging/sizes.py --record SIZES_JSON; do not edit -->"
END = "<!-- end of sizes table -->"
WHAT = {
    "kvstudio": "the one-folder app (inside the others)",
    ".tar.gz": "unpack anywhere, run `kvstudio`",
    ".deb": "Debian 12 or newer: `sudo apt install ./kvstudio_*.deb`",
    ".AppDir": "what appimagetool wraps into one .AppImage",
}


def _what(name: str) -> str:
    return next((text for key, text in WHAT.items() if name == key or name.endswith(key)), "")


def render_table(record: dict[str, object]) -> str:
    artifacts = record["artifacts"]
    assert isinstance(artifacts, dict)
    lines = ["| artifact | download | unpacked | what it is |", "|---|---|---|---|"]
    for name, size in sorted(artifacts.items()):
        download = (
            "-" if name in ("kvstudio", "KVStudio.AppDir") else f"{size['bytes'] / MIB:.1f} MiB"
        )
        lines.append(
            f"| {name} | {download} | {size['unpacked_bytes'] / MIB:.1f} MiB | {_what(name)} |"
        )
    lines += ["", f"Built {record['built']} on {record['host']}; budget for the unpacked app: "
              f"{BUDGET_MIB} MiB."]  # fmt: skip
    return "\n".join(lines)


def render_page(page_text: str, table: str) -> str:
    start = page_text.index(BEGIN) + len(BEGIN)
    end = page_text.index(END)
    return page_text[:start] + "\n" + table + "\n" + page_text[end:]


def record_sizes(report: Path) -> None:
    """Keep a build's sizes.json in docs/ and re-render the table in docs/install.md."""
    import datetime
    import platform

    record = {
        "artifacts": json.loads(report.read_text()),
        "built": datetime.date.today().isoformat(),
        "host": f"{platform.freedesktop_os_release().get('PRETTY_NAME', 'Linux')}, "
        f"Python {platform.python_version()}",
    }
    RECORD.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    PAGE.write_text(render_page(PAGE.read_text(), render_table(record)))


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="packaging/sizes.py")
    parser.add_argument("--record", type=Path, required=True, metavar="SIZES_JSON")
    record_sizes(parser.parse_args().record)
