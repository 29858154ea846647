"""The app's local server: started and stopped from the Server page, its request log as
signals on the GUI thread."""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Signal

from app.server.options import ServerOptions
from app.server.server_runner import LocalServer
from app.services.engine_client import EngineClient
from app.services.server_gateway import ClientGateway

log = logging.getLogger(__name__)


class LocalServerService(QObject):
    """Signals:
    started(str): the server listens; the base URL (http://HOST:PORT/v1).
    stopped(): it no longer listens.
    request_logged(object): a RequestRecord for each request served or refused.
    """

    started = Signal(str)
    stopped = Signal()
    request_logged = Signal(object)
    _record_arrived = Signal(object)  # from the server's thread

    def __init__(self, client: EngineClient, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.gateway = ClientGateway(client, self)
        self._server: LocalServer | None = None
        self._record_arrived.connect(self.request_logged)

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def base_url(self) -> str | None:
        return self._server.base_url if self._server is not None else None

    def start(self, options: ServerOptions) -> str:
        """Listen with `options`; BadInputError (one sentence) when it cannot."""
        self.stop()
        server = LocalServer(self.gateway, options)
        server.requests.listen(self._record_arrived.emit)
        server.start()
        self._server = server
        log.info("local server listening at %s", server.base_url)
        self.started.emit(server.base_url)
        return server.base_url

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self.gateway.cancel_all()
        server.stop()
        log.info("local server stopped (%s)", server.requests.summary())
        self.stopped.emit()
