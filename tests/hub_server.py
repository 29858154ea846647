"""A Hugging Face Hub look-alike on 127.0.0.1, for tests and benchmarks (no internet).

It answers the routes huggingface_hub calls, with the shapes the real Hub uses:
    GET  /api/models?search=&filter=gguf&sort=&limit=&expand[]=...   search results
    GET  /api/models/{repo}/tree/{rev}[/{path}]?recursive=            files, with lfs {oid, size, pointerSize}
    GET  /api/models/{repo}/revision/{rev}                            model info with siblings
    HEAD/GET /{repo}/resolve/{rev}/{file}                             LFS: 302 to the "CDN" (another port)
                                                                      with X-Linked-Etag / X-Linked-Size /
                                                                      X-Repo-Commit, as huggingface.co does
    GET  /cdn/{sha256}  (CDN port)                                    the bytes: Range -> 206 + Content-Range

Use it through HF_ENDPOINT exactly like the real Hub:

    with HubServer() as hub:
        hub.add_repo("acme/tiny-GGUF", {"tiny-Q8_0.gguf": path_or_bytes})
        os.environ["HF_ENDPOINT"] = hub.url
        hub.faults.cut_after["tiny-Q8_0.gguf"] = [100_000]   # drop the connection once

Fault knobs (`hub.faults`, keyed by file path in the repo; lists are consumed one per request):
    cut_after[path] = [n, ...]     close the connection after n body bytes
    status_first[path] = [503, ...] answer these statuses before serving normally (CDN GET)
    resolve_status_first[path] = [503, ...]  the same for HEAD/GET /resolve on the Hub
    ignore_range(path)             answer 200 with the whole body even when a Range is asked
    truncate[path] = [n, ...]      a well-formed but short response: Content-Length n, n bytes
    wrong_sha256(path)             the tree (and X-Linked-Etag) report a wrong sha256
    rate_limit[path] = bytes/s     slow the body down (for pause / cancel tests)
    stall_after[path] = [n, ...]   send n body bytes, then nothing for 30 s (a stalled server)
A repo can be gated (`gated=True`: 401 without token, 403 with a token not in `hub.tokens`).
`hub.log` records every request (method, path, Range, status, body bytes sent).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self
from urllib.parse import parse_qs, quote, unquote, urlsplit

LFS_POINTER_SIZE = 134
_SEND_CHUNK = 1024 * 1024


def _git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class HubFile:
    path: str  # path in the repo
    source: Path  # the bytes on disk
    size: int
    sha256: str
    lfs: bool = True

    @property
    def git_oid(self) -> str:
        """The git blob id (of the LFS pointer for LFS files), as the tree's 'oid'."""
        if not self.lfs:
            return _git_blob_sha1(self.source.read_bytes())
        pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256}\nsize {self.size}\n"
        return _git_blob_sha1(pointer.encode())


@dataclass
class HubRepo:
    repo_id: str
    files: dict[str, HubFile]
    commit: str
    gated: bool = False
    private: bool = False
    downloads: int = 0
    likes: int = 0
    last_modified: datetime = field(default_factory=lambda: datetime(2025, 1, 1, tzinfo=UTC))
    tags: tuple[str, ...] = ("gguf",)

    @property
    def author(self) -> str:
        return self.repo_id.split("/", 1)[0]


@dataclass
class Faults:
    cut_after: dict[str, list[int]] = field(default_factory=dict)
    status_first: dict[str, list[int]] = field(default_factory=dict)
    resolve_status_first: dict[str, list[int]] = field(default_factory=dict)
    truncate: dict[str, list[int]] = field(default_factory=dict)
    ignore_range_paths: set[str] = field(default_factory=set)
    wrong_sha_paths: set[str] = field(default_factory=set)
    rate_limit: dict[str, float] = field(default_factory=dict)
    stall_after: dict[str, list[int]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def ignore_range(self, path: str) -> None:
        self.ignore_range_paths.add(path)

    def wrong_sha256(self, path: str) -> None:
        self.wrong_sha_paths.add(path)

    def take(self, table: dict[str, list[int]], path: str) -> int | None:
        """The next value queued for `path` in `table` (consumed), or None."""
        with self.lock:
            queue = table.get(path)
            if queue:
                return queue.pop(0)
        return None

    def clear(self) -> None:
        with self.lock:
            for table in (self.cut_after, self.status_first, self.resolve_status_first, self.truncate,
                          self.rate_limit, self.stall_after):
                table.clear()
            self.ignore_range_paths.clear()
            self.wrong_sha_paths.clear()


@dataclass
class LoggedRequest:
    method: str
    path: str
    range: str | None
    status: int
    authorized: bool
    sent: int = 0  # body bytes written to the socket so far


class HubServer:
    """Two threaded HTTP servers (the Hub and its "CDN") sharing one set of repos."""

    def __init__(self, data_dir: Path | None = None) -> None:
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="fake-hub-"))
        self.repos: dict[str, HubRepo] = {}
        self.faults = Faults()
        self.tokens: set[str] = {"hf_test_token_with_access"}
        self.log: list[LoggedRequest] = []
        self._log_lock = threading.Lock()
        self._active = 0
        self._idle = threading.Condition(self._log_lock)
        self._by_sha: dict[str, HubFile] = {}
        self._hub = _Server(("127.0.0.1", 0), _Handler, self, cdn=False)
        self._cdn = _Server(("127.0.0.1", 0), _Handler, self, cdn=True)
        self._threads: list[threading.Thread] = []

    # -- life cycle -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._hub.server_address[1]}"

    @property
    def cdn_url(self) -> str:
        return f"http://127.0.0.1:{self._cdn.server_address[1]}"

    def start(self) -> Self:
        for server in (self._hub, self._cdn):
            t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        for server in (self._hub, self._cdn):
            server.shutdown()
            server.server_close()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- content ----------------------------------------------------------------------------

    def add_repo(
        self,
        repo_id: str,
        files: dict[str, bytes | Path],
        *,
        gated: bool = False,
        private: bool = False,
        downloads: int = 0,
        likes: int = 0,
        last_modified: datetime | None = None,
        sha256: dict[str, str] | None = None,
        lfs: bool = True,
    ) -> HubRepo:
        """Publish a repo. Values are bytes or a path (served from where it is, not copied).
        `sha256` may give known hashes of big files, to skip hashing them."""
        hub_files = {}
        for name, content in files.items():
            if isinstance(content, (bytes, bytearray)):
                source = self.data_dir / hashlib.sha256(content).hexdigest()
                source.write_bytes(content)
            else:
                source = Path(content)
            digest = (sha256 or {}).get(name) or _sha256_file(source)
            hub_file = HubFile(name, source, source.stat().st_size, digest, lfs=lfs)
            hub_files[name] = hub_file
            self._by_sha[digest] = hub_file
        commit = hashlib.sha1(f"{repo_id}:{sorted(hub_files)}:{time.time_ns()}".encode()).hexdigest()
        repo = HubRepo(
            repo_id, hub_files, commit, gated=gated, private=private, downloads=downloads, likes=likes,
            last_modified=last_modified or datetime(2025, 1, 1, tzinfo=UTC),
        )
        self.repos[repo_id] = repo
        return repo

    def bytes_sent(self, sha256: str = "") -> int:
        """Body bytes the CDN sent (for one file when its sha256 is given), once requests end."""
        self.wait_idle()
        with self._log_lock:
            return sum(r.sent for r in self.log if r.method == "GET" and f"/cdn/{sha256}" in r.path)

    def bytes_sent_now(self) -> int:
        """CDN body bytes sent so far, without waiting for requests to end."""
        with self._log_lock:
            return sum(r.sent for r in self.log if r.method == "GET" and "/cdn/" in r.path)

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Wait until no request is being served (the client may finish reading first)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._active == 0, timeout)

    def record(self, entry: LoggedRequest) -> LoggedRequest:
        with self._log_lock:
            self.log.append(entry)
        return entry

    def _request_started(self) -> None:
        with self._idle:
            self._active += 1

    def _request_ended(self) -> None:
        with self._idle:
            self._active -= 1
            self._idle.notify_all()

    def file_by_sha(self, sha: str) -> HubFile | None:
        return self._by_sha.get(sha)

    def reported_sha256(self, f: HubFile) -> str:
        if f.path in self.faults.wrong_sha_paths:
            return hashlib.sha256(b"not the file " + f.sha256.encode()).hexdigest()
        return f.sha256


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(8 * 1024 * 1024):
            h.update(chunk)
    return h.hexdigest()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], handler: type, hub: HubServer, *, cdn: bool) -> None:
        super().__init__(address, handler)
        self.hub = hub
        self.cdn = cdn


def _iso(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

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
        return self.hub.record(LoggedRequest(
            self.command, self.path, self.headers.get("Range"), status, self._token() is not None, sent
        ))

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

    def _error(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        self._json(status, {"error": message}, {"X-Error-Code": code, "X-Error-Message": message, **(headers or {})})

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
                return self._cdn(match.group(1)) if match else self._error(404, "NotFound", "no such object")
            if path == "/api/models":
                return self._search(query)
            if path == "/_fake/stats":  # not a Hub route: lets a benchmark in another process count bytes
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
        except (BrokenPipeError, ConnectionResetError):
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
            r for r in self.hub.repos.values()
            if search in r.repo_id.lower() and all(f in r.tags for f in filters) and not r.private
        ]
        key = {"downloads": lambda r: r.downloads, "likes": lambda r: r.likes,
               "lastModified": lambda r: r.last_modified}.get(sort)
        if key is not None:
            repos.sort(key=key, reverse=True)  # the Hub sorts descending
        self._json(200, [self._summary(r) for r in repos[:limit]])

    def _summary(self, repo: HubRepo) -> dict:
        return {
            "_id": repo.commit[:24], "id": repo.repo_id, "author": repo.author,
            "downloads": repo.downloads, "likes": repo.likes, "lastModified": _iso(repo.last_modified),
            "gated": "manual" if repo.gated else False, "private": repo.private,
            "tags": list(repo.tags), "library_name": "gguf", "createdAt": _iso(repo.last_modified),
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
            rest = f.path[len(prefix):]
            if "/" in rest and not recursive:
                folder = prefix + rest.split("/", 1)[0]
                entries[folder] = {"type": "directory", "oid": hashlib.sha1(folder.encode()).hexdigest(), "size": 0, "path": folder}
                continue
            parts = f.path.split("/")
            for i in range(len(prefix.split("/")) if prefix else 1, len(parts)):
                folder = "/".join(parts[:i])
                entries.setdefault(folder, {"type": "directory", "oid": hashlib.sha1(folder.encode()).hexdigest(), "size": 0, "path": folder})
            item = {"type": "file", "oid": f.git_oid, "size": f.size, "path": f.path}
            if f.lfs:
                item["lfs"] = {"oid": self.hub.reported_sha256(f), "size": f.size, "pointerSize": LFS_POINTER_SIZE}
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
                    sibling["lfs"] = {"sha256": self.hub.reported_sha256(f), "size": f.size, "pointerSize": LFS_POINTER_SIZE}
            siblings.append(sibling)
        self._json(200, {**self._summary(repo), "sha": repo.commit, "disabled": False, "siblings": siblings,
                         "usedStorage": sum(f.size for f in repo.files.values())})

    # -- files ------------------------------------------------------------------------------

    def _resolve(self, repo_id: str, revision: str, filename: str) -> None:
        repo = self._repo_or_error(repo_id, revision, api=False)
        if repo is None:
            return
        token = self._token()
        if repo.gated and token not in self.hub.tokens:
            status = 401 if token is None else 403
            message = (f"Access to model {repo_id} is restricted. You must have access to it and be "
                       f"authenticated to access it. Please log in.")
            return self._error(status, "GatedRepo", message, {"X-Repo-Commit": repo.commit})
        fault = self.hub.faults.take(self.hub.faults.resolve_status_first, filename)
        if fault is not None:
            return self._error(fault, "ServiceUnavailable", "try again later", {"Retry-After": "0"})
        f = repo.files.get(filename)
        if f is None:
            return self._error(404, "EntryNotFound", f"{filename} does not exist on \"{revision}\"",
                               {"X-Repo-Commit": repo.commit})
        common = {"X-Repo-Commit": repo.commit, "Accept-Ranges": "bytes"}
        if not f.lfs:
            return self._send_file(f, {**common, "ETag": f'"{f.git_oid}"'})
        location = f"{self.hub.cdn_url}/cdn/{f.sha256}?response-content-disposition=attachment%3B+filename%3D{quote(f.path.rsplit('/', 1)[-1])}"
        body = f"Found. Redirecting to {location}".encode()
        self.send_response(302)
        for k, v in {**common, "Location": location, "ETag": f'"{f.git_oid}"',
                     "X-Linked-Etag": f'"{self.hub.reported_sha256(f)}"', "X-Linked-Size": str(f.size),
                     "Content-Type": "text/plain; charset=utf-8", "Content-Length": str(len(body))}.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
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
            return self._error(status, "ServiceUnavailable", "try again later", {"Retry-After": "0"})
        start, end = 0, f.size - 1
        ranged = self.headers.get("Range")
        partial = False
        if ranged and f.path not in faults.ignore_range_paths:
            match = re.fullmatch(r"bytes=(\d+)-(\d*)", ranged.strip())
            if match:
                start = int(match.group(1))
                end = min(int(match.group(2)), f.size - 1) if match.group(2) else f.size - 1
                if start >= f.size or start > end:
                    return self._error(416, "RangeNotSatisfiable", "range not satisfiable",
                                       {"Content-Range": f"bytes */{f.size}"})
                partial = True
        length = end - start + 1
        short = faults.take(faults.truncate, f.path) if self.command == "GET" else None
        announced = min(length, short) if short is not None else length
        self.send_response(206 if partial else 200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(announced))
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
        rate = faults.rate_limit.get(f.path)
        to_send = announced if cut is None else min(announced, cut)
        if stall is not None:
            self._send_body(f.source, start, min(stall, to_send), rate, entry)
            self.wfile.flush()
            time.sleep(30)  # the client gives up (or pauses) long before
            return
        self._send_body(f.source, start, to_send, rate, entry)
        if cut is not None and cut < announced:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)  # a dropped connection mid-body

    def _send_body(self, source: Path, offset: int, count: int, rate: float | None, entry: LoggedRequest) -> None:
        """Send count bytes from offset, counting them in entry.sent as they go."""
        with open(source, "rb") as src:
            if rate is None:
                self.wfile.flush()
                while entry.sent < count:  # zero-copy, like a real CDN would
                    n = os.sendfile(self.connection.fileno(), src.fileno(), offset + entry.sent,
                                    min(count - entry.sent, 8 * _SEND_CHUNK))
                    if n == 0:
                        break
                    entry.sent += n
                return
            src.seek(offset)
            began = time.monotonic()
            step = max(4096, int(rate / 20))
            while entry.sent < count:
                chunk = src.read(min(step, count - entry.sent))
                if not chunk:
                    break
                self.wfile.write(chunk)
                entry.sent += len(chunk)
                ahead = entry.sent / rate - (time.monotonic() - began)
                if ahead > 0:
                    time.sleep(ahead)


def main(argv: list[str] | None = None) -> None:
    """Serve files as one repo until stdin closes: `python -m tests.hub_server REPO FILE...`.

    Prints one JSON line {"url": ..., "files": {name: {"size", "sha256"}}} when ready.
    """
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("repo")
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    with HubServer() as hub:
        repo = hub.add_repo(args.repo, {f.name: f for f in args.files})
        info = {n: {"size": f.size, "sha256": f.sha256} for n, f in repo.files.items()}
        print(json.dumps({"url": hub.url, "files": info}), flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
