"""A Hugging Face Hub look-alike on 127.0.0.1, for tests and benchmarks (no internet).

It answers the routes huggingface_hub calls, with the shapes the real Hub uses:
    GET  /api/models?search=&filter=gguf&sort=&limit=&expand[]=...
         search results
    GET  /api/models/{repo}/tree/{rev}[/{path}]?recursive=
         files, with lfs {oid, size, pointerSize}
    GET  /api/models/{repo}/revision/{rev}
         model info with siblings
    HEAD/GET /{repo}/resolve/{rev}/{file}
         LFS: 302 to the "CDN" (another port) with X-Linked-Etag / X-Linked-Size /
         X-Repo-Commit, as huggingface.co does
    GET  /cdn/{sha256}  (CDN port)
         the bytes: Range -> 206 + Content-Range

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
    hold_after[path] = [n, ...]    send n body bytes, set `faults.held`, wait for
                                   `faults.release` (or 60 s) and end the request
    overlong[path] = [n, ...]      the body goes on for n bytes past the file, with no
                                   Content-Length (ended by closing the connection)
    overlong_announced[path] = [n, ...]  the same, announced: Content-Length counts the n bytes
    redirect_get[path] = url       the Hub answers HEAD /resolve itself (no CDN redirect), and
                                   GET /resolve with a 302 to `url` (another host)
HubServer(tls=ssl_context) serves both ports over HTTPS (url / cdn_url become https://).
A repo can be gated (`gated=True`: 401 without token, 403 with a token not in `hub.tokens`).
`hub.log` records every request (method, path, Range, status, body bytes sent).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import ssl
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Self

LFS_POINTER_SIZE = 134


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
        pointer = (
            f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256}\n"
            f"size {self.size}\n"
        )
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
    pipeline_tag: str | None = None

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
    overlong: dict[str, list[int]] = field(default_factory=dict)
    overlong_announced: dict[str, list[int]] = field(default_factory=dict)
    redirect_get: dict[str, str] = field(default_factory=dict)
    hold_after: dict[str, list[int]] = field(default_factory=dict)
    held: threading.Event = field(default_factory=threading.Event, repr=False)
    release: threading.Event = field(default_factory=threading.Event, repr=False)
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
            for table in (
                self.cut_after,
                self.status_first,
                self.resolve_status_first,
                self.truncate,
                self.rate_limit,
                self.stall_after,
                self.hold_after,
                self.overlong,
                self.overlong_announced,
            ):
                table.clear()
            self.redirect_get.clear()
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

    def __init__(self, data_dir: Path | None = None, *, tls: ssl.SSLContext | None = None) -> None:
        self._scheme = "https" if tls is not None else "http"
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
        from tests.hub_routes import HubRequestHandler

        self._hub = HubHttpServer(("127.0.0.1", 0), HubRequestHandler, self, cdn=False, tls=tls)
        self._cdn = HubHttpServer(("127.0.0.1", 0), HubRequestHandler, self, cdn=True, tls=tls)
        self._threads: list[threading.Thread] = []

    # -- life cycle -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"{self._scheme}://127.0.0.1:{self._hub.server_address[1]}"

    @property
    def cdn_url(self) -> str:
        return f"{self._scheme}://127.0.0.1:{self._cdn.server_address[1]}"

    def start(self) -> Self:
        for server in (self._hub, self._cdn):
            t = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
            )
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
        tags: tuple[str, ...] = ("gguf",),
        pipeline_tag: str | None = None,
    ) -> HubRepo:
        """Publish a repo. Values are bytes or a path (served from where it is, not copied).
        `sha256` may give known hashes of big files, to skip hashing them. `tags` are what a
        search's filter= matches (the Hub's: "gguf", "conversational", ...)."""
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
        commit = hashlib.sha1(
            f"{repo_id}:{sorted(hub_files)}:{time.time_ns()}".encode()
        ).hexdigest()
        repo = HubRepo(
            repo_id,
            hub_files,
            commit,
            gated=gated,
            private=private,
            downloads=downloads,
            likes=likes,
            last_modified=last_modified or datetime(2025, 1, 1, tzinfo=UTC),
            tags=tags,
            pipeline_tag=pipeline_tag,
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


class HubHttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(
        self,
        address: tuple[str, int],
        handler: type,
        hub: HubServer,
        *,
        cdn: bool,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(address, handler)
        self.hub = hub
        self.cdn = cdn
        if tls is not None:
            # The handshake runs on the handler's thread (first read), not in accept().
            self.socket = tls.wrap_socket(
                self.socket, server_side=True, do_handshake_on_connect=False
            )


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
    # Run the importable module's main, so tests.hub_routes and this script share one copy.
    from tests.hub_server import main as module_main

    module_main()
