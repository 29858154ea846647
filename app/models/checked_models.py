"""Check a model file before llama.cpp loads it, unless it passed the same checks before and
has not changed since.

Why: the checks (the header's, then the long token list's, app.models.gguf_tokenizer) walk a
262,144-token vocabulary twice, about 0.3-0.5 s of CPU at every load of the same file, and
the test suite starts about 140 engines on the starter model. So a file that passes is
recorded in `checked-models.json` in the cache folder (app.platform.paths.cache_dir), under
what tells it unchanged (recent_headers.file_key: resolved path, device, inode, size,
modification and change times) and a fingerprint of the checks' own code, so changed checks
check every file again. As recent_headers does, a file changed in the last two seconds is not
recorded. A refusal is never recorded: a refused file is checked, and refused, every time.
The record is only a shortcut: a missing, corrupt or unwritable one costs a check, never a
load (it is rewritten whole, atomically, by the next pass).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from pathlib import Path

from app import __version__
from app.models.recent_headers import FileKey, changed_lately, file_key
from app.platform.atomic_write import write_atomically
from app.platform.paths import cache_dir

log = logging.getLogger(__name__)

RECORD_NAME = "checked-models.json"
_KEPT = 64  # files; the oldest recorded is forgotten first


def check_model_file(path: Path) -> None:
    """Raise what the checks raise (ModelFileMissingError, InvalidGgufError and its kinds, in
    one sentence) for the model file at `path`, unless it passed them before, unchanged."""
    before = _stat(path)
    if before is not None and list(file_key(str(path), before)) in _recorded():
        log.info("%s passed the model checks before and is unchanged: not checked again", path)
        return
    _check(path)
    after = _stat(path)
    if before is None or after is None or changed_lately(before):
        return
    key = file_key(str(path), before)
    if file_key(str(path), after) == key:  # not changed while it was checked
        _record(key)


def record_path() -> Path:
    return cache_dir() / RECORD_NAME


def _check(path: Path) -> None:
    # Imported here: a load of a recorded file (most loads) needs no GGUF reader, so the
    # engine does not import it (and its validator) at every start.
    from app.models.gguf_read import check_gguf
    from app.models.gguf_tokenizer import check_token_list_file

    check_token_list_file(path, check_gguf(path))


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except (OSError, ValueError):  # the checks say why, in their words
        return None


@functools.cache
def checks_fingerprint() -> str:
    """The app's version and the checks' source (app/models/gguf_*.py: the reader, validator,
    header and tokenizer rules), so any change to the checks makes every file be checked
    again. A frozen app has no sources beside it: its version stands for them."""
    digest = hashlib.sha256(__version__.encode())
    for source in sorted(Path(__file__).parent.glob("gguf_*.py")):
        try:
            digest.update(source.name.encode() + source.read_bytes())
        except OSError:
            pass
    return digest.hexdigest()[:16]


def _recorded() -> list[list[object]]:
    """The recorded files' keys (as JSON lists), [] when the record is missing, unreadable,
    corrupt or from other checks."""
    try:
        record = json.loads(record_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return []
    if not isinstance(record, dict) or record.get("checks") != checks_fingerprint():
        return []
    files = record.get("files")
    return [f for f in files if _is_key(f)] if isinstance(files, list) else []


def _is_key(entry: object) -> bool:
    return (
        isinstance(entry, list)
        and len(entry) == 6  # recent_headers.FileKey's fields
        and isinstance(entry[0], str)
        and all(type(value) is int for value in entry[1:])
    )


def _record(key: FileKey) -> None:
    # Other entries for the same path are of its earlier contents: dropped.
    files = [f for f in _recorded() if f[0] != key[0]]
    files = [*files, list(key)][-_KEPT:]
    text = json.dumps({"checks": checks_fingerprint(), "files": files})
    try:
        record_path().parent.mkdir(parents=True, exist_ok=True)
        write_atomically(record_path(), text + "\n")
    except OSError as error:  # a read-only cache: the next load checks again
        log.info("could not record %s as checked in %s: %s", key[0], record_path(), error)
