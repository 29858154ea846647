"""Which `Host` and `Origin` headers the server answers, against web pages and DNS rebinding.

A page of any site can send requests to 127.0.0.1, and through DNS rebinding (its own name
pointed at 127.0.0.1) read the answers too. So, as Ollama does: on a loopback address the
`Host` must name this machine (localhost, a loopback address, the address listened on) or one
the user allowed (`--allowed-hosts`); the port is not checked, so that a forwarded port
works. On another address the API key, required there, keeps pages out instead.

A browser's `Origin` must be a page of an allowed host (any port), an origin listed with
`--cors`, or a local app's (app://, file://, tauri://, vscode-webview://, vscode-file://,
which no web site can send). The "null" origin of sandboxed frames is refused.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from app.platform.errors import BadInputError
from app.server.openai_request import ApiError
from app.server.options import ServerOptions, is_loopback

ANY_HOST = "*"
LOCAL_APP_SCHEMES = frozenset({"app", "file", "tauri", "vscode-webview", "vscode-file"})
_THIS_MACHINE = ("localhost", "127.0.0.1", "::1")


def check_allowed_hosts(hosts: Iterable[str]) -> None:
    """Refuse, in one sentence, an --allowed-hosts value that is not a host name."""
    for host in hosts:
        if host != ANY_HOST and (
            not host or any(c in host for c in "/:@ ") or host != host.strip()
        ):
            raise BadInputError(
                f"Allowed host '{host}' is not a host name like kvstudio.lan (or * for any)."
            )


def host_refusal(host_header: str, options: ServerOptions) -> ApiError | None:
    if not is_loopback(options.host) or _host_allowed(_host_name(host_header), options):
        return None
    return ApiError(
        403,
        f"This server does not answer requests for host '{host_header}'; start it with "
        f"--allowed-hosts {_host_name(host_header) or 'NAME'} to allow that name.",
        code="host_not_allowed",
    )


def origin_refusal(origin: str, options: ServerOptions) -> ApiError | None:
    if _origin_allowed(origin, options):
        return None
    return ApiError(
        403,
        f"Requests from web pages at {origin} are refused; start the server with "
        f"--cors {origin} to allow that page.",
        code="origin_not_allowed",
    )


def _host_name(host_header: str) -> str:
    """'[::1]:8080' -> '::1', 'LocalHost.:8080' -> 'localhost'."""
    host = host_header.strip().lower()
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else ""
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    return host.rstrip(".")


def _host_allowed(name: str, options: ServerOptions) -> bool:
    allowed = {h.lower() for h in options.allowed_hosts}
    return ANY_HOST in allowed or name in allowed or _names_this_machine(name, options)


def _names_this_machine(name: str, options: ServerOptions) -> bool:
    if name in _THIS_MACHINE or name == options.host.strip("[]").lower():
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _origin_allowed(origin: str, options: ServerOptions) -> bool:
    given = origin.strip().rstrip("/").lower()
    if given in {o.rstrip("/").lower() for o in options.cors_origins}:
        return True
    try:
        parts = urlsplit(given)
    except ValueError:
        return False
    if parts.scheme in LOCAL_APP_SCHEMES:
        return True
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    # A page of this machine or of a name the user allowed; '*' does not make every web site
    # one of those (--cors names the sites)
    allowed = {h.lower() for h in options.allowed_hosts}
    return parts.hostname in allowed or _names_this_machine(parts.hostname, options)
