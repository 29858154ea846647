"""The local server's socket and uvicorn: bound at once (so a port in use is said at start, in
one sentence), served on the caller's thread (`kvstudio serve`) or on a thread of its own (the
app), stopped by `stop()` or, on the main thread, by Ctrl+C."""

from __future__ import annotations

import errno
import logging
import socket
import sys
import threading

import uvicorn

from app.platform.errors import BadInputError
from app.server.allowed_hosts import check_allowed_hosts
from app.server.api import build_app
from app.server.client_limits import ClientLimits
from app.server.embedder_process import Embedder
from app.server.gateway import EngineGateway
from app.server.guard import Guard
from app.server.http_protocol import guarded_h11
from app.server.options import ServerOptions, check_options
from app.server.request_log import RequestLog

log = logging.getLogger(__name__)

GRACEFUL_STOP_S = 2  # open streams get this long after a stop; then they are cut


class PortInUseError(BadInputError, OSError):
    """The address and port are taken by another program."""


class LocalServer:
    """Listens from construction on; `base_url` has the real port (also when 0 was asked)."""

    def __init__(
        self,
        gateway: EngineGateway,
        options: ServerOptions,
        requests: RequestLog | None = None,
        sock: socket.socket | None = None,
        limits: ClientLimits | None = None,
    ) -> None:
        """`sock`: from bind(options), when the port was taken before the engine was ready;
        `limits`: what one client may take (ClientLimits' defaults unless a test shortens them)."""
        check_options(options)
        self.requests = requests or RequestLog()
        self._socket = sock or bind(options)
        port = int(self._socket.getsockname()[1])
        self.options = ServerOptions(**{**options.__dict__, "port": port})
        limits = limits or ClientLimits()
        check_allowed_hosts(self.options.allowed_hosts)
        # the /v1/embeddings process, stopped with the server (serve's finally)
        self._embedder = Embedder()
        app = build_app(gateway, self.options, self.requests, self._embedder)
        config = uvicorn.Config(
            Guard(app, self.options, limits, self.requests),
            http=guarded_h11(limits),  # h11 with a deadline for each request's head
            h11_max_incomplete_event_size=limits.max_header_bytes,
            timeout_keep_alive=limits.keep_alive_s,
            log_config=None,  # the app's logging stays as the app set it up
            access_log=False,  # the request log says what happened, without query strings
            lifespan="off",
            # Only a backstop: requests in progress have their own limit (Guard), and half-sent
            # ones their deadline; over it uvicorn answers 503 to everyone.
            limit_concurrency=limits.max_connections,
            timeout_graceful_shutdown=GRACEFUL_STOP_S,
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return self.options.base_url

    def serve(self) -> None:
        """Serve until stop() or Ctrl+C (on the main thread uvicorn turns SIGINT into a
        graceful stop, then raises KeyboardInterrupt when it is done)."""
        try:
            self._server.run(sockets=[self._socket])
        finally:
            self._socket.close()
            self._embedder.close()

    def start(self) -> None:
        """Serve on a thread of its own."""
        self._thread = threading.Thread(target=self.serve, name="local-server", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=GRACEFUL_STOP_S + 3)
            self._thread = None
        else:
            self._socket.close()


def bind(options: ServerOptions) -> socket.socket:
    """The listening socket; a port in use or an address not of this machine is refused in
    one sentence (BadInputError)."""
    host, port = options.host, options.port
    try:
        family, kind, proto, _name, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM
        )[0]
    except socket.gaierror:
        raise BadInputError(f"'{host}' is not an address this machine can listen on.") from None
    sock = socket.socket(family, kind, proto)
    if sys.platform != "win32":  # there it would let another program take the port over
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as error:
        sock.close()
        if error.errno == errno.EADDRINUSE:
            raise PortInUseError(
                f"Port {port} on {host} is in use by another program; choose another port."
            ) from None
        if error.errno == errno.EADDRNOTAVAIL:
            raise BadInputError(f"{host} is not an address of this machine.") from None
        raise BadInputError(f"Could not listen on {host}:{port}: {error.strerror}.") from None
    sock.setblocking(False)
    return sock
