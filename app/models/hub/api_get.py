"""The Hub's JSON API (search, a repo's file tree) with a deadline a user can wait for.

huggingface_hub's HfApi.list_models and list_repo_tree give their requests no timeout (its
shared client is built with timeout=None) and retry five times with backoff (1+2+4+8+8 s):
an unreachable Hub took 24 s to say "ConnectError", and a server that accepts a connection
and never answers kept a search waiting forever. These GETs use the same session (its
proxies, its User-Agent) with one attempt and API_TIMEOUT_S per phase, so a failed search
says so in under 10 s; pressing Search again is the retry.

    items = get_json_list(f"{hub_endpoint()}/api/models", params, headers)
"""

from __future__ import annotations

import errno
import logging
import re
import ssl
from collections.abc import Mapping, Sequence

import httpx2
from huggingface_hub.utils import get_session, hf_raise_for_status

from app.models.hub_env import hub_endpoint
from app.platform.errors import HubUnreachableError

log = logging.getLogger(__name__)

API_TIMEOUT_S = 8  # connect, and then each read; under the 10 s the issue asks for
MAX_PAGES = 20  # a tree of 20 pages (20,000 files on the Hub) is more than any GGUF repo has


QueryParams = Mapping[str, str | int | bool | Sequence[str]]


def get_json_list(
    url: str, params: QueryParams | None, headers: dict[str, str], *, pages: int = MAX_PAGES
) -> list[object]:
    """Every item of a paginated JSON list (the Hub's Link: rel=next pages, at most `pages`).

    HTTP errors raise huggingface_hub's own errors (hf_raise_for_status), for
    hub_errors.translate; a network failure or a timeout raises HubUnreachableError with
    one sentence saying which.
    """
    items: list[object] = []  # JSON values: the caller checks each
    next_url: str | None = url
    for _ in range(pages):
        if next_url is None:
            break
        try:
            response = get_session().get(
                next_url, params=params, headers=headers, timeout=API_TIMEOUT_S
            )
        except (httpx2.TransportError, httpx2.TimeoutException) as error:
            log.debug("GET %s failed", next_url, exc_info=True)
            raise HubUnreachableError(unreachable_message(error)) from error
        hf_raise_for_status(response)
        page = response.json()
        items.extend(page if isinstance(page, list) else [page])
        next_url = response.links.get("next", {}).get("url")
        params = None  # the next link carries the query already
    return items


def unreachable_message(error: BaseException) -> str:
    """ "Can't reach Hugging Face (timeout after 8 s)." and the like: what failed, in words.
    A certificate the system does not trust is not a network failure: it says "certificate"
    and where to add one (a company proxy that inspects HTTPS signs with its own)."""
    where = "" if hub_endpoint() == "https://huggingface.co" else f" at {hub_endpoint()}"
    untrusted = certificate_problem(error)
    if untrusted is not None:
        return (
            f"Hugging Face{where} sent a certificate this computer does not trust "
            f"({untrusted}); if your network inspects HTTPS with its own certificate, add it "
            "to the system's certificate store, then try again."
        )
    return (
        f"Can't reach Hugging Face{where} ({_reason(error)}). "
        "Check the network connection, then try again."
    )


def certificate_problem(error: BaseException) -> str | None:
    """The verifier's words when `error` (or what it wraps) is a failed certificate check."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return str(cause.verify_message or cause.reason or "unverified")
        cause = cause.__cause__ or cause.__context__
    text = str(error)
    if "CERTIFICATE_VERIFY_FAILED" in text:  # httpx keeps only the text of some errors
        found = re.search(r"certificate verify failed: ([^(]+?)\s*\(", text)
        return found.group(1) if found else "certificate verify failed"
    return None


def _reason(error: BaseException) -> str:
    if isinstance(error, httpx2.TimeoutException):
        return f"timeout after {API_TIMEOUT_S} s"
    cause: BaseException | None = error
    while cause is not None:  # httpx wraps the socket's OSError
        if isinstance(cause, OSError) and cause.errno is not None:
            if cause.errno == errno.ECONNREFUSED:
                return "connection refused"
            if cause.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
                return "no route to the server"
        cause = cause.__cause__ or cause.__context__
    text = str(error).lower()
    if "name or service" in text or "name resolution" in text or "getaddrinfo" in text:
        return "its name could not be looked up"
    if "refused" in text:
        return "connection refused"
    return f"no connection: {type(error).__name__}"
