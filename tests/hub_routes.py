"""The HTTP side of the fake Hub (tests/hub_server.py): one handler for the Hub's routes
and its "CDN", answering with the shapes and headers huggingface.co uses."""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import ssl
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, quote, unquote, urlsplit

from tests.hub_server import LFS_POINTER_SIZE, HubFile, HubRepo, LoggedRequest

if TYPE_CHECKING:
    from tests.hub_server import HubHttpServer, HubServer

_SEND_CHUNK = 1024 * 1024


def _iso(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


class HubRequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: HubHttpServer

    def log_message(self, format: str, *args: object) -> None:  # quiet: tests read hub.log
        pass

    @property
    def hub(self) -> HubServer:
        return self.server.hub

    # -- plumbing ---------------------------------------------------------------------------

    def _token(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        return auth[7:].strip() if auth.lower().startswith("bearer ") else None

    def _finish(self, status: int, sent: int) -> LoggedRequest:
        return self.hub.record(
            LoggedRequest(
                self.command,
                self.path,
                self.headers.get("Range"),
                status,
                self._token() is not None,
                sent,
            )
        )

    def _json(self, status: int, payload: object, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self._finish(status, len(body))

    def _error(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        self._json(
            status,
            {"error": message},
            {"X-Error-Code": code, "X-Error-Message": message, **(headers or {})},
        )

    def do_HEAD(self) -> None:
        self._route()

    def do_GET(self) -> None:
        self._route()

    def _route(self) -> None:
        self.hub._request_started()
        try:
            self._dispatch()
        finally:
            self.hub._request_ended()

    def _dispatch(self) -> None:
        url = urlsplit(self.path)
        path = unquote(url.path)
        query = parse_qs(url.query)
        try:
            if self.server.cdn:
                match = re.fullmatch(r"/cdn/([0-9a-f]{64})", path)
                return (
                    self._cdn(match.group(1))
                    if match
                    else self._error(404, "NotFound", "no such object")
                )
            if path == "/api/models":
                return self._search(query)
            if (
                path == "/_fake/stats"
            ):  # not a Hub route: lets a benchmark in another process count bytes
                return self._json(200, {"cdn_bytes_sent": self.hub.bytes_sent_now()})
            match = re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/([^/]+)(?:/(.*))?", path)
            if match:
                return self._tree(match.group(1), match.group(2), match.group(3) or "", query)
            match = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?", path)
            if match:
                return self._info(match.group(1), match.group(2) or "main", query)
            match = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
            if match:
                return self._resolve(match.group(1), match.group(2), match.group(3))
            self._error(404, "NotFound", f"no route {path}")
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True

    # -- API --------------------------------------------------------------------------------

    def _repo_or_error(self, repo_id: str, revision: str, *, api: bool) -> HubRepo | None:
        repo = self.hub.repos.get(repo_id)
        if repo is None or (repo.private and self._token() not in self.hub.tokens):
            status = 401 if self._token() is None else 404
            self._error(status, "RepoNotFound", "Repository not found")
            return None
        if revision not in ("main", repo.commit):
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            return None
        return repo

    def _search(self, query: dict[str, list[str]]) -> None:
        search = (query.get("search") or [""])[0].lower()
        filters = query.get("filter", [])
        sort = (query.get("sort") or [""])[0]
        limit = int((query.get("limit") or ["1000"])[0])
        repos = [
            r
            for r in self.hub.repos.values()
            if search in r.repo_id.lower() and all(f in r.tags for f in filters) and not r.private
        ]
        key = {
            "downloads": lambda r: r.downloads,
            "likes": lambda r: r.likes,
            "lastModified": lambda r: r.last_modified,
        }.get(sort)
        if key is not None:
            repos.sort(key=key, reverse=True)  # the Hub sorts descending
        self._json(200, [self._summary(r) for r in repos[:limit]])

    def _summary(self, repo: HubRepo) -> dict:
        return {
            "_id": repo.commit[:24],
            "id": repo.repo_id,
            "author": repo.author,
            "downloads": repo.downloads,
            "likes": repo.likes,
            "lastModified": _iso(repo.last_modified),
            "gated": "manual" if repo.gated else False,
            "private": repo.private,
            "tags": list(repo.tags),
            "pipeline_tag": repo.pipeline_tag,
            "library_name": "gguf",
            "createdAt": _iso(repo.last_modified),
        }

    def _tree(self, repo_id: str, revision: str, sub: str, query: dict[str, list[str]]) -> None:
        repo = self._repo_or_error(repo_id, revision, api=True)
        if repo is None:
            return
        recursive = (query.get("recursive") or ["false"])[0].lower() == "true"
        prefix = sub.strip("/") + "/" if sub else ""
        entries: dict[str, dict] = {}
        for f in repo.files.values():
            if not f.path.startswith(prefix):
                continue
            rest = f.path[len(prefix) :]
            if "/" in rest and not recursive:
                folder = prefix + rest.split("/", 1)[0]
                entries[folder] = {
                    "type": "directory",
                    "oid": hashlib.sha1(folder.encode()).hexdigest(),
                    "size": 0,
                    "path": folder,
                }
                continue
            parts = f.path.split("/")
            for i in range(len(prefix.split("/")) if prefix else 1, len(parts)):
                folder = "/".join(parts[:i])
                entries.setdefault(
                    folder,
                    {
                        "type": "directory",
                        "oid": hashlib.sha1(folder.encode()).hexdigest(),
                        "size": 0,
                        "path": folder,
                    },
                )
            item = {"type": "file", "oid": f.git_oid, "size": f.size, "path": f.path}
            if f.lfs:
                item["lfs"] = {
                    "oid": self.hub.reported_sha256(f),
                    "size": f.size,
                    "pointerSize": LFS_POINTER_SIZE,
                }
            entries[f.path] = item
        self._json(200, sorted(entries.values(), key=lambda e: e["path"]))

    def _info(self, repo_id: str, revision: str, query: dict[str, list[str]]) -> None:
        repo = self._repo_or_error(repo_id, revision, api=True)
        if repo is None:
            return
        blobs = (query.get("blobs") or ["false"])[0].lower() == "true"
        siblings = []
        for f in sorted(repo.files.values(), key=lambda f: f.path):
            sibling: dict = {"rfilename": f.path}
            if blobs:
                sibling.update(size=f.size, blobId=f.git_oid)
                if f.lfs:
                    sibling["lfs"] = {
                        "sha256": self.hub.reported_sha256(f),
                        "size": f.size,
                        "pointerSize": LFS_POINTER_SIZE,
                    }
            siblings.append(sibling)
        self._json(
            200,
            {
                **self._summary(repo),
                "sha": repo.commit,
                "disabled": False,
                "siblings": siblings,
                "usedStorage": sum(f.size for f in repo.files.values()),
            },
        )

    # -- files ------------------------------------------------------------------------------

    def _resolve(self, repo_id: str, revision: str, filename: str) -> None:
        repo = self._repo_or_error(repo_id, revision, api=False)
        if repo is None:
            return
        token = self._token()
        if repo.gated and token not in self.hub.tokens:
            status = 401 if token is None else 403
            message = (
                f"Access to model {repo_id} is restricted. You must have access to it and be "
                f"authenticated to access it. Please log in."
            )
            return self._error(status, "GatedRepo", message, {"X-Repo-Commit": repo.commit})
        fault = self.hub.faults.take(self.hub.faults.resolve_status_first, filename)
        if fault is not None:
            return self._error(fault, "ServiceUnavailable", "try again later", {"Retry-After": "0"})
        f = repo.files.get(filename)
        if f is None:
            return self._error(
                404,
                "EntryNotFound",
                f'{filename} does not exist on "{revision}"',
                {"X-Repo-Commit": repo.commit},
            )
        common = {"X-Repo-Commit": repo.commit, "Accept-Ranges": "bytes"}
        elsewhere = self.hub.faults.redirect_get.get(filename)
        if elsewhere is not None:
            return self._redirect_get(f, elsewhere, common)
        if not f.lfs:
            return self._send_file(f, {**common, "ETag": f'"{f.git_oid}"'})
        basename = quote(f.path.rsplit("/", 1)[-1])
        location = (
            f"{self.hub.cdn_url}/cdn/{f.sha256}"
            f"?response-content-disposition=attachment%3B+filename%3D{basename}"
        )
        body = f"Found. Redirecting to {location}".encode()
        self.send_response(302)
        for k, v in {
            **common,
            "Location": location,
            "ETag": f'"{f.git_oid}"',
            "X-Linked-Etag": f'"{self.hub.reported_sha256(f)}"',
            "X-Linked-Size": str(f.size),
            "Content-Type": "text/plain; charset=utf-8",
            "Content-Length": str(len(body)),
        }.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self._finish(302, 0)

    def _redirect_get(self, f: HubFile, location: str, common: dict[str, str]) -> None:
        """HEAD: the file's headers from the Hub itself; GET: 302 to `location`."""
        if self.command == "HEAD":
            self.send_response(200)
            for k, v in {
                **common,
                "ETag": f'"{f.git_oid}"',
                "X-Linked-Etag": f'"{self.hub.reported_sha256(f)}"',
                "X-Linked-Size": str(f.size),
                "Content-Length": str(f.size),
            }.items():
                self.send_header(k, v)
            self.end_headers()
            self._finish(200, 0)
            return
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()
        self._finish(302, 0)

    def _cdn(self, sha: str) -> None:
        f = self.hub.file_by_sha(sha)
        if f is None:
            return self._error(404, "NotFound", "no such object")
        self._send_file(f, {"ETag": f'"{f.sha256}"', "Accept-Ranges": "bytes"})

    def _send_file(self, f: HubFile, headers: dict[str, str]) -> None:
        faults = self.hub.faults
        status = faults.take(faults.status_first, f.path) if self.command == "GET" else None
        if status is not None:
            return self._error(
                status, "ServiceUnavailable", "try again later", {"Retry-After": "0"}
            )
        start, end = 0, f.size - 1
        ranged = self.headers.get("Range")
        partial = False
        if ranged and f.path not in faults.ignore_range_paths:
            match = re.fullmatch(r"bytes=(\d+)-(\d*)", ranged.strip())
            if match:
                start = int(match.group(1))
                end = min(int(match.group(2)), f.size - 1) if match.group(2) else f.size - 1
                if start >= f.size or start > end:
                    return self._error(
                        416,
                        "RangeNotSatisfiable",
                        "range not satisfiable",
                        {"Content-Range": f"bytes */{f.size}"},
                    )
                partial = True
        length = end - start + 1
        short = faults.take(faults.truncate, f.path) if self.command == "GET" else None
        announced = min(length, short) if short is not None else length
        get = self.command == "GET"
        extra = (faults.take(faults.overlong, f.path) if get else None) or 0
        extra_announced = (faults.take(faults.overlong_announced, f.path) if get else None) or 0
        self.send_response(206 if partial else 200)
        self.send_header("Content-Type", "application/octet-stream")
        if extra:
            self.send_header("Connection", "close")  # the body ends when the connection does
        else:
            self.send_header("Content-Length", str(announced + extra_announced))
        if partial:
            self.send_header("Content-Range", f"bytes {start}-{start + announced - 1}/{f.size}")
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        entry = self._finish(206 if partial else 200, 0)
        if self.command == "HEAD":
            return
        cut = faults.take(faults.cut_after, f.path)
        stall = faults.take(faults.stall_after, f.path)
        hold = faults.take(faults.hold_after, f.path)
        rate = faults.rate_limit.get(f.path)
        to_send = announced if cut is None else min(announced, cut)
        if hold is not None:
            self._send_body(f.source, start, min(hold, to_send), rate, entry)
            self.wfile.flush()
            faults.held.set()
            faults.release.wait(60)  # the test kills the client meanwhile; this request ends
            return
        if stall is not None:
            self._send_body(f.source, start, min(stall, to_send), rate, entry)
            self.wfile.flush()
            time.sleep(30)  # the client gives up (or pauses) long before
            return
        self._send_body(f.source, start, to_send, rate, entry)
        if extra or extra_announced:
            self.wfile.write(b"X" * (extra or extra_announced))  # bytes the file does not have
            self.wfile.flush()
            entry.sent += extra or extra_announced
            self.close_connection = True
            return
        if cut is not None and cut < announced:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)  # a dropped connection mid-body

    def _send_body(
        self, source: Path, offset: int, count: int, rate: float | None, entry: LoggedRequest
    ) -> None:
        """Send count bytes from offset, counting them in entry.sent as they go."""
        with open(source, "rb") as src:
            if rate is None and not isinstance(
                self.connection, ssl.SSLSocket
            ):  # sendfile would skip TLS
                self.wfile.flush()
                while entry.sent < count:  # zero-copy, like a real CDN would
                    n = os.sendfile(
                        self.connection.fileno(),
                        src.fileno(),
                        offset + entry.sent,
                        min(count - entry.sent, 8 * _SEND_CHUNK),
                    )
                    if n == 0:
                        break
                    entry.sent += n
                return
            src.seek(offset)
            began = time.monotonic()
            step = max(4096, int(rate / 20)) if rate else _SEND_CHUNK
            while entry.sent < count:
                chunk = src.read(min(step, count - entry.sent))
                if not chunk:
                    break
                self.wfile.write(chunk)
                entry.sent += len(chunk)
                ahead = entry.sent / rate - (time.monotonic() - began) if rate else 0.0
                if ahead > 0:
                    time.sleep(ahead)
