"""A folder served over HTTP on 127.0.0.1 the way GitHub serves release assets: GET and HEAD,
`Range: bytes=N-` answered with 206 and Content-Range, Content-Length always. A fault knob cuts a
file's body once after n bytes (the downloader must resume from there), and every request is
logged with its Range, so a test can see the resume happen. `tls=` serves it over HTTPS.

    with ReleaseServer(folder) as server:
        server.cut_after["kvstudio-backend-cpu-....tar.gz"] = [1_000_000]
        url = server.url + "/backends.json"
"""

from __future__ import annotations

import re
import shutil
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self


class ReleaseServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, folder: Path, *, tls: ssl.SSLContext | None = None) -> None:
        self.folder = folder
        self.scheme = "https" if tls is not None else "http"
        self.cut_after: dict[str, list[int]] = {}
        self.log: list[tuple[str, str, str]] = []  # (method, file name, Range header or "")
        self._thread: threading.Thread | None = None
        super().__init__(("127.0.0.1", 0), _Handler)
        if tls is not None:
            # The handshake runs on the handler's thread (first read), not in accept().
            self.socket = tls.wrap_socket(
                self.socket, server_side=True, do_handshake_on_connect=False
            )

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.server_address[1]}"

    def gets(self, name: str) -> list[str]:
        """The Range header of each GET of `name`, in order ("" for the whole file)."""
        return [r for method, n, r in self.log if method == "GET" and n == name]

    def handle_error(self, request: object, client_address: object) -> None:
        if isinstance(sys.exc_info()[1], ssl.SSLError | ConnectionError):
            return  # a client that refuses the certificate ends the handshake: expected
        super().handle_error(request, client_address)

    def __enter__(self) -> Self:
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(10)


class _Handler(BaseHTTPRequestHandler):
    server: ReleaseServer

    def log_message(self, format: str, *args: object) -> None:
        pass  # the server's own log records what tests read

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _serve(self, body: bool) -> None:
        name = self.path.lstrip("/").split("?")[0]
        path = self.server.folder / name
        asked = self.headers.get("Range", "")
        self.server.log.append((self.command, name, asked))
        if "/" in name or not path.is_file():
            self.send_error(404)
            return
        size = path.stat().st_size
        match = re.fullmatch(r"bytes=(\d+)-", asked)
        start = int(match.group(1)) if match else 0
        if start >= size and size:
            self.send_error(416)
            return
        self.send_response(206 if match else 200)
        self.send_header("Content-Length", str(size - start))
        self.send_header("Accept-Ranges", "bytes")
        if match:
            self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
        self.end_headers()
        if not body:
            return
        cuts = self.server.cut_after.get(name)
        limit = cuts.pop(0) if cuts else None
        with path.open("rb") as f:
            f.seek(start)
            if limit is None:
                shutil.copyfileobj(f, self.wfile)
                return
            self.wfile.write(f.read(limit))
            self.wfile.flush()
        self.close_connection = True  # a cut: the connection ends before the body does
