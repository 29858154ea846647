"""How long and how much one client may take of the local server before it is cut off, so that
a slow or hostile client never keeps the others waiting (issue 24).

The defaults are what `kvstudio serve` and the app use; tests shorten the timeouts.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClientLimits:
    header_timeout_s: float = 10.0  # a request's line and headers must all come within this
    body_timeout_s: float = 30.0  # and its whole body within this, after the headers
    keep_alive_s: int = 5  # an idle connection between requests is closed after this
    max_header_bytes: int = 16 * 1024  # the request line and headers together
    # Connections from one address that are still sending their request line and headers;
    # beyond this the oldest of them is closed (all local clients share 127.0.0.1, so a
    # refusal of new ones would shut out the well-behaved ones too).
    waiting_connections_per_client: int = 32
    max_connections: int = 512  # open at once, all clients: beyond it uvicorn answers 503
    max_json_depth: int = 64  # arrays and objects inside each other
    max_messages: int = 2048  # in one chat request (OpenAI's own limit)
    max_text_chars: int = 1_000_000  # all the text of one request (a token is >= 1 character)
