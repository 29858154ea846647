"""Install a backend package the user picked and make it the engine's backend (first-run dialog).

    install_file(store, archive, probe)                         # a .tar.gz on disk
    install_url(store, url, probe, control=..., on_progress=...) # downloaded first, then the same
    with downloaded_package(store, url) as archive: ...         # `kvstudio backend add URL`

Both go through BackendStore.add (every file checked against the manifest's sha256, a test load
in a child process) and then BackendStore.use (which hashes and loads it again before it becomes
the choice): any failure raises one sentence and leaves the previous backend chosen. A URL is
fetched only here, only when the user asked, with the Hub downloader's own transfer code
(resumable, cancellable, no Hugging Face token sent), into a hidden folder under the backends
folder that is removed afterwards. A certificate this computer does not trust is named as one,
as the Hub's downloads do (untrusted_certificate), not as a network fault.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote, urlsplit

from app.backends.store import BackendStore, InstalledBackend, Probe
from app.models.hub.api_get import certificate_problem
from app.models.hub.download_control import DownloadControl
from app.models.hub.partial_file import FetchTarget
from app.models.hub.transfer import fetch
from app.platform.disk_space import check_free_space
from app.platform.errors import AppError, BadInputError, DownloadError
from app.platform.units import size_number

log = logging.getLogger(__name__)

# The largest real package archive is 66 MiB (every RDNA3 target); unpacked, add() allows 8 GiB.
MAX_DOWNLOAD_BYTES = 4 << 30
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
HEAD_TIMEOUT_S = 20.0

ProgressFn = Callable[[int, int], None]  # (bytes on disk, total bytes)


def install_file(store: BackendStore, archive: Path, probe: Probe) -> InstalledBackend:
    """Add the package in `archive` and make it the engine's backend."""
    added = store.add(archive, probe)
    return store.use(added.name, probe)


def check_url(url: str) -> str:
    """The URL, stripped, when the app may download from it: https, or http on this machine
    (a server the user runs locally). One sentence otherwise."""
    url = url.strip()
    parts = urlsplit(url)
    if not url:
        raise BadInputError("Paste the package's https:// address first.")
    if parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS:
        return url
    if parts.scheme != "https" or not parts.hostname:
        raise BadInputError(
            f"{url[:100]} is not an https:// address; backend packages are downloaded over "
            "https only (or plain http from this machine)."
        )
    return url


def archive_name(url: str) -> str:
    """The file name the URL ends with ("kvstudio-backend-vulkan-….tar.gz"), safe as a name."""
    name = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    name = "".join(c for c in name if c.isalnum() or c in "._-")[:120].lstrip(".")
    return name or "backend-package.tar.gz"


def install_url(
    store: BackendStore,
    url: str,
    probe: Probe,
    *,
    control: DownloadControl | None = None,
    on_progress: ProgressFn | None = None,
) -> InstalledBackend:
    """Download the package at `url`, then install_file it. `control.cancel()` stops the
    download (it raises app.models.hub.download_control.DownloadCancelled) and nothing changes."""
    with downloaded_package(store, url, control=control, on_progress=on_progress) as archive:
        return install_file(store, archive, probe)


@contextmanager
def downloaded_package(
    store: BackendStore,
    url: str,
    *,
    control: DownloadControl | None = None,
    on_progress: ProgressFn | None = None,
) -> Iterator[Path]:
    """The package at `url`, downloaded into a hidden folder of the backends folder that is
    removed when the block ends (`kvstudio backend add URL` adds it from there)."""
    url = check_url(url)
    control = control or DownloadControl()
    name = archive_name(url)
    location, total = _size_and_location(url, name)
    store.folder.mkdir(parents=True, exist_ok=True)
    # Hidden (a dot folder), so installed() never lists it, and on the backends' own disk.
    folder = Path(tempfile.mkdtemp(prefix=".download-", dir=store.folder))
    try:
        check_free_space(folder, total)
        archive = folder / name
        target = FetchTarget(
            url=location,
            size=total,
            sha256=None,  # the package's manifest holds the sha256 of every file; add checks them
            incomplete=folder / f"{name}.incomplete",
            display_name=name,
            repo_id=urlsplit(location).hostname or name,
            send_auth=False,
        )
        progress = (lambda done: on_progress(done, total)) if on_progress else None
        fetch_package(target, control, progress)
        target.incomplete.rename(archive)
        yield archive
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def untrusted_certificate(host: str, error: BaseException) -> DownloadError | None:
    """The sentence for `error` when it (or what it wraps) is a certificate this computer does
    not trust; None for any other failure. Behind a network that inspects HTTPS with its own
    certificate the fix is adding that certificate, not checking the connection."""
    why = certificate_problem(error)
    if why is None:
        return None
    return DownloadError(
        f"{host} sent a certificate this computer does not trust ({why}); if your network "
        "inspects HTTPS with its own certificate, add it to the system's certificate store, "
        "then try again."
    )


def fetch_package(
    target: FetchTarget, control: DownloadControl, on_progress: Callable[[int], None] | None
) -> None:
    """The Hub downloader's fetch, with a certificate failure named for the package's host (the
    downloader's own sentence names Hugging Face)."""
    try:
        fetch(target, token=None, control=control, on_progress=on_progress)
    except DownloadError as error:
        named = untrusted_certificate(urlsplit(target.url).hostname or target.url, error)
        if named is not None:
            raise named from error
        raise


def _size_and_location(url: str, name: str) -> tuple[str, int]:
    """HEAD the URL (following redirects): where the file is and how large; one sentence when
    the server refuses, is unreachable, or the file is larger than a package can be."""
    import httpx2
    from huggingface_hub.errors import OfflineModeIsEnabled
    from huggingface_hub.utils import get_session

    host = urlsplit(url).hostname or url
    try:
        response = get_session().head(
            url,
            headers={"Accept-Encoding": "identity"},
            follow_redirects=True,
            timeout=HEAD_TIMEOUT_S,
        )
    except OfflineModeIsEnabled:
        raise DownloadError(
            "Offline mode is on (HF_HUB_OFFLINE), so nothing is downloaded; "
            "install the package from a file instead."
        ) from None
    except (httpx2.TransportError, httpx2.TimeoutException) as error:
        if (untrusted := untrusted_certificate(host, error)) is not None:
            raise untrusted from None
        raise DownloadError(
            f"Could not reach {host} ({type(error).__name__}); check the address and the "
            "network connection."
        ) from None
    if response.status_code >= 400:
        raise DownloadError(f"{host} answered HTTP {response.status_code} for {name}.")
    location = str(response.url)
    try:
        check_url(location)
    except AppError:
        raise DownloadError(
            f"{host} redirected {name} to {location[:100]}, which is not https; "
            "nothing was downloaded."
        ) from None
    length = response.headers.get("content-length", "")
    if not length.isdigit():
        raise DownloadError(f"{host} did not say how large {name} is, so it was not downloaded.")
    total = int(length)
    if total > MAX_DOWNLOAD_BYTES:
        raise DownloadError(
            f"{name} is {size_number(total, 'GiB')} GiB, larger than a backend package can be; "
            "it was not downloaded."
        )
    return location, total
