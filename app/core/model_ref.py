"""Turn what a user typed (a .gguf path, or `starter`) into a checked model file.

`resolve_model` is the one place that does this for the CLI and the GUI; other kinds of
reference (library names, Hub REPO:QUANT) are added as further branches here.
"""

from __future__ import annotations

from pathlib import Path

from app.core import starter
from app.core.errors import ModelFileMissingError
from app.core.gguf_header import GgufHeader, read_gguf_header

STARTER_WORD = "starter"


def resolve_model(text: str) -> Path:
    """The GGUF file `text` names, validated (header and size). Raises
    ModelFileMissingError, NotAGgufError or TruncatedGgufError with one sentence."""
    text = text.strip()
    if text.lower() == STARTER_WORD:
        path = starter.starter_path()
    else:
        path = Path(text).expanduser()
    check_gguf(path)
    return path.resolve()


def check_gguf(path: Path) -> GgufHeader:
    """Read the header: magic b'GGUF', a parseable header, and a file long enough for the
    end of its last tensor's data (app.core.gguf_header does the reading)."""
    if path.is_dir():
        raise ModelFileMissingError(f"{path} is a folder, not a .gguf model file.")
    return read_gguf_header(path)
