"""Install a backend package from the published index (first run, the Backends page).

    index = fetch_index()                                  # only when the user asked
    entry = index.entry_for("rocm-rdna3", platform_tag())
    install_entry(store, entry, probe, control=..., on_progress=...)

The index comes from the project's release (DEFAULT_INDEX_URL), or from KVSTUDIO_BACKEND_INDEX,
a developer and mirror setting: the index is not trusted, only read (app/backends/package_index.py
says what is checked). The archive is downloaded with the Hub downloader's transfer code (ranged
GETs that resume from the bytes on disk, the sha256 the index gives checked as it writes, no
token sent) into `backends/.downloads/`, which is kept when the network fails (the next try
resumes) and removed once the package is installed or refused.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from urllib.parse import urlsplit

from app.backends.install import (
    ProgressFn,
    archive_name,
    check_url,
    fetch_package,
    untrusted_certificate,
)
from app.backends.package_archive import ExpectedPackage
from app.backends.package_index import (
    INDEX_NAME,
    MAX_INDEX_BYTES,
    IndexEntry,
    PackageIndex,
    parse_index,
)
from app.backends.signing import SignatureError, trusted_keys
from app.backends.store import BackendStore, InstalledBackend, Probe
from app.models.hub.download_control import DownloadCancelled, DownloadControl
from app.models.hub.partial_file import FetchTarget
from app.platform.disk_space import check_free_space
from app.platform.errors import AppError, ChecksumMismatchError, DownloadError

log = logging.getLogger(__name__)

DEFAULT_INDEX_URL = f"https://github.com/kvstudio/kvstudio/releases/latest/download/{INDEX_NAME}"
INDEX_ENV = "KVSTUDIO_BACKEND_INDEX"
DOWNLOADS = ".downloads"  # hidden: BackendStore.installed() skips dot folders
INDEX_TIMEOUT_S = 20.0


def index_url() -> str:
    return os.environ.get(INDEX_ENV) or DEFAULT_INDEX_URL


def fetch_index(url: str | None = None) -> PackageIndex:
    """Read the package index (at most 1 MiB) from `url` (default: index_url()); one sentence
    when it cannot be read."""
    import httpx2
    from huggingface_hub.errors import OfflineModeIsEnabled
    from huggingface_hub.utils import get_session

    url = check_url(url or index_url())
    try:
        with get_session().stream(
            "GET", url, follow_redirects=True, timeout=INDEX_TIMEOUT_S
        ) as response:
            if response.status_code >= 400:
                raise DownloadError(
                    f"The package index at {url[:100]} answered HTTP {response.status_code}."
                )
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_INDEX_BYTES:
                    raise DownloadError(
                        f"The package index at {url[:100]} is larger than an index can be."
                    )
            final = str(response.url)
    except OfflineModeIsEnabled:
        raise DownloadError(
            "Offline mode is on (HF_HUB_OFFLINE), so the package index was not read; "
            "install a package from a file instead."
        ) from None
    except (httpx2.TransportError, httpx2.TimeoutException) as error:
        server = f"The package index's server {urlsplit(url).hostname or url}"
        untrusted = untrusted_certificate(server, error)
        if untrusted is not None:
            raise untrusted from None
        raise DownloadError(
            f"Could not read the package index at {url[:100]} ({type(error).__name__}); check "
            "the network connection."
        ) from None
    return parse_index(body.decode("utf-8", errors="replace"), final)


def install_entry(
    store: BackendStore,
    entry: IndexEntry,
    probe: Probe,
    *,
    control: DownloadControl | None = None,
    on_progress: ProgressFn | None = None,
) -> InstalledBackend:
    """Download the index's package, check it (sha256 and size from the index, then the
    signature and files in BackendStore.add, which also refuses a manifest for another variant
    or version), test-load it and make it the engine's backend."""
    url = check_url(entry.url)
    if entry.key not in {key.key_id for key in trusted_keys()}:
        raise SignatureError(
            f"The index offers {entry.variant} signed with key {entry.key}, which this app "
            "does not trust, so it was not downloaded."
        )
    folder = store.folder / DOWNLOADS
    check_free_space(folder, entry.size)
    archive = folder / f"{entry.sha256[:16]}-{archive_name(url)}"
    target = FetchTarget(
        url=url,
        size=entry.size,
        sha256=entry.sha256,  # checked as the bytes are written; a mismatch deletes the file
        incomplete=archive.with_name(archive.name + ".incomplete"),
        display_name=archive_name(url),
        repo_id=entry.variant,
        send_auth=False,
    )
    progress = (lambda done: on_progress(done, entry.size)) if on_progress else None
    try:
        fetch_package(target, control or DownloadControl(), progress)
        target.incomplete.rename(archive)
        expected = ExpectedPackage(entry.variant, entry.version)
        added = store.add(archive, probe, expected=expected)
        installed = store.use(added.name, probe)
    except DownloadCancelled:
        _remove(folder)
        raise
    except DownloadError as error:
        # A network fault keeps the partial file, so the next try resumes from it; bytes that
        # do not have the index's sha256 were deleted by fetch, and their folder goes too.
        if isinstance(error, ChecksumMismatchError) or not target.incomplete.exists():
            _remove(folder)
        raise
    except AppError:
        _remove(folder)  # refused: nothing of it is kept
        raise
    _remove(folder)
    return installed


def _remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
