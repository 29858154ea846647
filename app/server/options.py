"""What the local server listens on and the limits it keeps, checked before anything binds."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from app.platform.errors import BadInputError

DEFAULT_PORT = 8080
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class ServerOptions:
    host: str = LOOPBACK
    port: int = DEFAULT_PORT  # 0: any free port (tests)
    api_key: str = ""  # "": no key asked for (only allowed on a loopback address)
    max_body_bytes: int = 4 * 1024 * 1024
    max_tokens_limit: int = 4096  # the most one request may ask for (and the default)
    max_requests: int = 8  # requests in progress at once (running or waiting for the engine)
    cors_origins: tuple[str, ...] = ()  # browsers' origins allowed to call it; none: CORS off
    allowed_hosts: tuple[str, ...] = ()  # Host names answered besides this machine's
    log_prompts: bool = False  # the request log may show prompt text (never the key)
    # A base model (no chat template) only continues text: chat requests to it are refused
    # with a pointer to /v1/completions unless this is set (`--allow-chat-on-base-model`).
    allow_chat_on_base_model: bool = False

    @property
    def base_url(self) -> str:
        host = self.host if ":" not in self.host else f"[{self.host}]"
        return f"http://{host}:{self.port}/v1"


def is_loopback(host: str) -> bool:
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_options(options: ServerOptions) -> None:
    """Refuse, in one sentence, what the server must not start with."""
    if not 0 <= options.port <= 65535:
        raise BadInputError(f"The port must be between 1 and 65535, not {options.port}.")
    if not options.host.strip():
        raise BadInputError("The address to listen on is empty; use 127.0.0.1.")
    key = options.api_key
    if key and (key != key.strip() or any(ord(c) < 33 or ord(c) > 126 for c in key)):
        raise BadInputError("The API key must be printable ASCII without spaces.")
    if not is_loopback(options.host) and not key:
        raise BadInputError(
            f"Listening on {options.host} lets other machines use the model, so it needs an "
            "API key; without one the server listens on 127.0.0.1 only."
        )
    for origin in options.cors_origins:
        if origin == "*" or not origin.startswith(("http://", "https://")):
            raise BadInputError(
                f"CORS origin '{origin}' is not an origin like http://localhost:3000."
            )
