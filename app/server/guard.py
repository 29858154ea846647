"""What every request passes before the app sees it, cheapest first: the Host and the page it
comes from (allowed_hosts.py), the API key, a POST's body read whole and bounded
(request_body.py, request_bounds.py), and only then one of the slots for requests in
progress. So a client that stalls, or has no key, never holds a slot (issue 24).
Refusals carry OpenAI's error shape and get a line in the request log."""

from __future__ import annotations

import hmac
import json
import logging
import time

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from app.server.allowed_hosts import host_refusal, origin_refusal
from app.server.anthropic_shapes import anthropic_error
from app.server.client_limits import ClientLimits
from app.server.openai_request import ApiError
from app.server.openai_shapes import error_body
from app.server.options import ServerOptions
from app.server.request_body import ClientGoneError, content_type_refusal, read_body, replay
from app.server.request_bounds import check_bounds
from app.server.request_log import RequestLog, RequestRecord

log = logging.getLogger(__name__)

CLIENT_GONE = 499  # nginx's status for "the client closed the connection", for the log only


# Answered without the API key.
PUBLIC_PATHS = ("/health", "/v1/health")


class Guard:
    def __init__(
        self, app: ASGIApp, options: ServerOptions, limits: ClientLimits, requests: RequestLog
    ) -> None:
        self.app, self.options, self.limits, self.requests = app, options, limits, requests
        self.api_key, self.max_requests = options.api_key, options.max_requests
        self.in_progress = 0  # only touched on the event loop's thread

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        arrived = time.time()
        try:
            receive = await self._admitted(scope, receive)
            if self.in_progress >= self.max_requests:
                raise ApiError(
                    429,
                    f"Too many requests at once (this server takes {self.max_requests}); "
                    "try again when one has finished.",
                    code="too_many_requests",
                    kind="rate_limit_error",
                )
        except ApiError as refusal:
            self._log(scope, arrived, refusal.status, refusal.message)
            await _send_error(send, refusal, scope.get("path", ""))
            return
        except ClientGoneError:
            self._log(scope, arrived, CLIENT_GONE, "the client went away before its whole body")
            return
        self.in_progress += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_progress -= 1

    async def _admitted(self, scope: Scope, receive: Receive) -> Receive:
        """The `receive` the app is to read from; ApiError for a refusal."""
        headers = Headers(scope=scope)
        for refusal in (
            host_refusal(headers.get("host", ""), self.options),
            origin_refusal(headers["origin"], self.options) if "origin" in headers else None,
        ):
            if refusal is not None:
                raise refusal
        if scope["method"] == "OPTIONS":  # a browser's CORS preflight, which has no key
            return receive
        self._check_key(scope)
        if scope["method"] != "POST":
            return receive
        refusal = content_type_refusal(headers.get("content-type", ""))
        if refusal is not None:
            raise refusal
        body = await read_body(
            receive,
            headers.get("content-length", ""),
            self.options.max_body_bytes,
            self.limits.body_timeout_s,
        )
        check_bounds(body, self.limits)
        return replay(body, receive)

    def _check_key(self, scope: Scope) -> None:
        # /health tells a load balancer only "ok" or why not, without a key, as llama-server's
        if not self.api_key or scope.get("path") in PUBLIC_PATHS:
            return
        given = _bearer(scope)
        if given is None:
            raise ApiError(
                401,
                "You didn't provide an API key: send it as 'Authorization: Bearer KEY' "
                "or 'X-Api-Key: KEY'.",
                code="missing_api_key",
            )
        # compare_digest: the time taken says nothing about how much of the key matched
        if not hmac.compare_digest(given.encode(), self.api_key.encode()):
            raise ApiError(401, "Incorrect API key provided.", code="invalid_api_key")

    def _log(self, scope: Scope, arrived: float, status: int, error: str) -> None:
        client = scope.get("client")
        self.requests.add(
            RequestRecord(
                request_id="",
                at=arrived,
                client=client[0] if client else "",
                method=scope["method"],
                path=scope["path"],
                status=status,
                error=error,
            )
        )


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


async def _send_error(send: Send, refusal: ApiError, path: str) -> None:
    shaped: object = error_body(refusal.message, refusal.kind, refusal.param, refusal.code)
    if path.rstrip("/").endswith("/messages"):  # Anthropic's clients read their own shape
        shaped = anthropic_error(refusal.status, refusal.message)
    body = json.dumps(shaped).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", b"%d" % len(body)),
        # The body may not have been read (or not all of it): without this the connection
        # would stay open for as long as the client keeps sending the rest.
        (b"connection", b"close"),
    ]
    if refusal.status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
