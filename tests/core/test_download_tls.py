"""Pausing an HTTPS download keeps the partial file a byte-exact prefix of the served file.

Regression test for 144c7ca: pause shut the connection with SSLSocket.shutdown, which drops
the TLS state before shutting the socket, so a read racing with it returned raw TLS records;
they were written into the `.incomplete` file as body bytes, the resume continued after them
and the final SHA-256 failed (the whole download was deleted). Plain HTTP never showed it,
so this test runs the fake Hub and its CDN over HTTPS on 127.0.0.1 with a self-signed
certificate, trusted the way a user behind a private CA does it: SSL_CERT_FILE, read by
huggingface_hub's default HTTP client (httpx2 / httpcore2) when that client is made.
"""

from __future__ import annotations

import hashlib
import random
import shutil
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub.utils import close_session

from app.models.hub import download_entry, list_gguf_files, partial_paths
from app.models.hub.client import GgufEntry
from app.models.hub.download_control import DownloadControl, DownloadPaused
from tests.hub_server import HubServer

# Over a second per test on 2 cores: in the full suite, not the fast tier (docs/testing.md).
pytestmark = pytest.mark.slow

REPO = "acme/tls-GGUF"
NAME = "tls-Q8_0.gguf"
SIZE = 64 * 1024 * 1024
# Where the pauses land, as fractions of the file; 0: as soon as the body flows again after
# the resume (h11's first chunk). By position, not time, so a faster machine pauses as often.
PAUSE_AT = (
    0.0,
    0.0,
    0.04,
    0.0,
    0.09,
    0.0,
    0.15,
    0.0,
    0.21,
    0.0,
    0.28,
    0.0,
    0.34,
    0.0,
    0.42,
    0.0,
    0.5,
    0.0,
    0.6,
    0.0,
)
# Threads switch every 0.1 ms instead of 5 ms, so a pause often runs between a read's
# "stop asked?" check and its recv: with the old code 33-43% of the pauses then corrupted the
# partial file (measured, 168 pauses), so 20 clean pauses in a row by luck: < 1 in 1,000.
SWITCH_INTERVAL_S = 1e-4


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(cert.pem, key.pem): a self-signed certificate for IP 127.0.0.1, made by `openssl`."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the `openssl` command line is not installed; it makes this test's certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    result = subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    if result.returncode != 0:
        pytest.skip(
            f"`openssl req` could not make a self-signed certificate: {result.stderr[-300:]}"
        )
    return cert, key


@pytest.fixture
def hub(certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    """The fake Hub over HTTPS (replaces tests.hub_fixtures' `hub`, so `hub_env` uses it)."""
    cert, key = certificate
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    close_session()  # huggingface_hub's shared client reads SSL_CERT_FILE when it is made
    try:
        with HubServer(tls=server_ctx) as server:
            yield server
    finally:
        close_session()  # later tests get a client made without this certificate


@pytest.fixture
def served(hub_env: HubServer, tiny_gguf) -> tuple[HubServer, bytes]:
    """A real tiny GGUF padded with random bytes to SIZE, published as REPO/NAME."""
    source = tiny_gguf(NAME)
    head = source.read_bytes()
    data = head + random.Random(144).randbytes(SIZE - len(head))
    source.write_bytes(data)
    hub_env.add_repo(REPO, {NAME: source})
    return hub_env, data


@pytest.fixture
def busy_thread_switching() -> Iterator[None]:
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def _first_difference(a: bytes, b: bytes) -> int:
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while hi - lo > 1:  # bisect on slices: fast even for tens of MB
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if a[:mid] == b[:mid] else (lo, mid)
    return lo


def _download_until(entry: GgufEntry, partial: Path, at: int) -> object:
    """Run download_entry on a thread, pause it once the partial file passes byte `at` (or
    first grows), and return what it returned or raised."""
    before = partial.stat().st_size if partial.exists() else 0
    control = DownloadControl()
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(download_entry(entry, control=control))
        except Exception as error:  # noqa: BLE001 - handed to the test thread, which checks it
            outcome.append(error)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    # Pause while body bytes are flowing (the race needs reads in progress), not during the
    # HEAD or the handshake.
    deadline = time.monotonic() + 10
    while worker.is_alive() and time.monotonic() < deadline:
        if partial.exists() and partial.stat().st_size > max(at, before):
            break
        time.sleep(0.0005)
    control.pause()
    worker.join(10)
    assert not worker.is_alive(), "the download did not stop within 10 s of a pause"
    (result,) = outcome
    return result


def test_pausing_an_https_download_keeps_a_byte_exact_partial_and_resumes(
    served, busy_thread_switching
) -> None:
    hub, data = served
    assert hub.url.startswith("https://") and hub.cdn_url.startswith("https://")
    entry = list_gguf_files(REPO).pick("Q8_0")  # over HTTPS too
    (partial,) = partial_paths(entry)

    for n, fraction in enumerate(PAUSE_AT, 1):
        result = _download_until(entry, partial, int(fraction * SIZE))
        assert isinstance(result, DownloadPaused), f"pause {n} ended in {result!r}"
        kept = partial.read_bytes()
        assert 0 < len(kept) < len(data)
        assert kept == data[: len(kept)], (
            f"pause {n} (at {fraction:.0%}): the partial file differs from the served file "
            f"at byte {_first_difference(kept, data):,} of the {len(kept):,} kept"
        )

    path = download_entry(entry)
    assert hashlib.sha256(path.read_bytes()).digest() == hashlib.sha256(data).digest()
    assert not partial.exists()

    # Each resume asked for the rest of the file (Range from the bytes kept), never all of it.
    hub.wait_idle()
    gets = [r for r in hub.log if r.method == "GET" and "/cdn/" in r.path]
    assert len(gets) == len(PAUSE_AT) + 1
    assert gets[0].range is None and all(g.range and g.status == 206 for g in gets[1:])
