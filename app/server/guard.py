"""What every request passes before a route sees it: the API key, and how many requests may
be in progress at once. Refusals carry OpenAI's error shape."""

from __future__ import annotations

import hmac
import json

from starlette.types import ASGIApp, Receive, Scope, Send

from app.server.openai_shapes import error_body

PUBLIC_PATHS = ("/health", "/v1/health")


class Guard:
    def __init__(self, app: ASGIApp, api_key: str, max_requests: int) -> None:
        self.app, self.api_key, self.max_requests = app, api_key, max_requests
        self.in_progress = 0  # only touched on the event loop's thread

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            await _send_error(send, *refusal)
            return
        self.in_progress += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_progress -= 1

    def _refusal(self, scope: Scope) -> tuple[int, str, str, str] | None:
        # /health tells a load balancer only "ok" or why not, without a key, as llama-server's
        if self.api_key and scope.get("path") not in PUBLIC_PATHS:
            given = _bearer(scope)
            if given is None:
                return (
                    401,
                    "You didn't provide an API key: send it as 'Authorization: Bearer KEY' "
                    "or 'X-Api-Key: KEY'.",
                    "invalid_request_error",
                    "missing_api_key",
                )
            # compare_digest: the time taken says nothing about how much of the key matched
            if not hmac.compare_digest(given.encode(), self.api_key.encode()):
                return (
                    401,
                    "Incorrect API key provided.",
                    "invalid_request_error",
                    "invalid_api_key",
                )
        if self.in_progress >= self.max_requests:
            return (
                429,
                f"Too many requests at once (this server takes {self.max_requests}); "
                "try again when one has finished.",
                "rate_limit_error",
                "too_many_requests",
            )
        return None


def _bearer(scope: Scope) -> str | None:
    """The key from 'Authorization: Bearer KEY', or else from 'X-Api-Key: KEY' (Anthropic's
    and some editors' header, which llama-server also takes)."""
    bearer = other = None
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            bearer = token.strip() if scheme.lower() == "bearer" and token.strip() else None
        elif name == b"x-api-key":
            other = value.decode("latin-1").strip() or None
    return bearer if bearer is not None else other


async def _send_error(send: Send, status: int, message: str, kind: str, code: str) -> None:
    body = json.dumps(error_body(message, kind, None, code)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
