"""Read a GGUF's header from the Hub with HTTP range requests (never the whole file).

Starts with the first 4 MiB; when the header is longer (big vocabularies), the parser
says how many bytes it needs and only the missing range is fetched. A server that
ignores Range still costs no more than what is read: the stream is closed early.
The header is validated as it is parsed (app.models.gguf_validate), with the same caps as a
local file's: a hostile header is refused in one line before any fit is computed from it.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

import httpx2
from huggingface_hub.utils import build_hf_headers, get_session

from app.models.gguf_header import GgufHeader
from app.models.gguf_read import GgufHeaderIncompleteError, parse_gguf_header
from app.models.gguf_validate import MAX_HEADER_BYTES
from app.models.hub.hub_errors import gated_message, translate
from app.models.hub.safe_paths import check_relative_name
from app.models.hub.tokens import load_token
from app.models.hub.transfer import same_origin
from app.models.hub_env import hub_endpoint, is_offline
from app.platform.errors import (
    DownloadError,
    GatedRepoError,
    HubUnreachableError,
    NotAGgufError,
    TruncatedGgufError,
)
from app.platform.units import size

log = logging.getLogger(__name__)

FIRST_READ = 4 * 1024 * 1024
_CACHE_SIZE = 64
_cache: OrderedDict[tuple[str, str, str, str], GgufHeader] = OrderedDict()
_cache_lock = threading.Lock()


def fetch_remote_header(
    repo_id: str, filename: str, *, revision: str = "main", token: str | None = None
) -> GgufHeader:
    """The parsed header of `filename` in `repo_id`, from a few MiB of range reads (cached)."""
    check_relative_name(filename)
    key = (hub_endpoint(), repo_id, revision, filename)
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    if is_offline():
        raise HubUnreachableError(
            "Offline mode is on (HF_HUB_OFFLINE): the model's header cannot be read from the Hub."
        )
    token = token if token is not None else load_token()
    location, total = _locate(repo_id, filename, revision, token)
    send_auth = same_origin(location, hub_endpoint())
    data = bytearray()
    want = min(FIRST_READ, total) if total else FIRST_READ
    while True:
        data += _read_range(location, len(data), want, token, send_auth, repo_id, filename)
        try:
            header = parse_gguf_header(bytes(data), total)
            break
        except GgufHeaderIncompleteError as need:
            if total is not None and len(data) >= total:
                raise TruncatedGgufError(f"{filename} ends inside its GGUF header.") from None
            want = max(need.bytes_needed, 2 * len(data))
            if total is not None:
                want = min(want, total)
            if want > MAX_HEADER_BYTES:
                raise NotAGgufError(
                    f"{filename}'s GGUF header is larger than "
                    f"{size(MAX_HEADER_BYTES, 0, unit='MiB')}; "
                    f"it was not read."
                ) from None
            if want <= len(data):
                raise DownloadError(
                    f"The server sent no more bytes of {filename}'s header."
                ) from None
    log.debug("%s/%s: header parsed from %d bytes", repo_id, filename, len(data))
    with _cache_lock:
        _cache[key] = header
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return header


def _locate(
    repo_id: str, filename: str, revision: str, token: str | None
) -> tuple[str, int | None]:
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    endpoint = hub_endpoint()
    url = hf_hub_url(repo_id, filename, revision=revision, endpoint=endpoint)
    try:
        meta = get_hf_file_metadata(
            url, token=token or False, endpoint=endpoint, retry_on_errors=True
        )
    except Exception as error:
        raise translate(error, repo_id, filename) from error
    return meta.location, meta.size


def _read_range(
    url: str, start: int, end: int, token: str | None, send_auth: bool, repo_id: str, filename: str
) -> bytes:
    """Bytes [start, end) of url; reads at most end - start bytes even if Range is ignored."""
    headers = build_hf_headers(token=token or False, library_name="kvstudio")
    if not send_auth:
        headers.pop("authorization", None)
    headers["Range"] = f"bytes={start}-{end - 1}"
    headers["Accept-Encoding"] = "identity"
    out = bytearray()
    try:
        with get_session().stream(
            "GET", url, headers=headers, follow_redirects=True, timeout=30.0
        ) as r:
            if r.status_code in (401, 403):
                raise GatedRepoError(gated_message(repo_id, r.status_code))
            if r.status_code >= 400:
                raise HubUnreachableError(
                    f"Reading {filename}'s header failed (HTTP {r.status_code})."
                )
            skip = start if r.status_code == 200 else 0  # Range ignored: the body starts at byte 0
            for chunk in r.iter_raw():
                if skip:
                    cut = min(skip, len(chunk))
                    chunk, skip = chunk[cut:], skip - cut
                out += chunk
                if len(out) >= end - start:
                    break
    except (httpx2.TransportError, httpx2.TimeoutException) as error:
        raise translate(error, repo_id, filename) from error
    return bytes(out[: end - start])


def clear_header_cache() -> None:
    """Forget remote headers read so far (e.g. after a new token opens gated files)."""
    with _cache_lock:
        _cache.clear()
