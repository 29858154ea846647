"""Downloads use the certificates this computer trusts, and a certificate it does not trust is
called a certificate problem, not a network one (behind a company proxy that inspects HTTPS
the fix is to add its certificate, not to check the cable).

The fake Hub and its CDN run over HTTPS on 127.0.0.1 with a self-signed certificate. Trusted
through OpenSSL's own variable for the system store (SSL_CERT_FILE), the listing and the
download work; with the system's usual store, which does not hold it, the listing and
the download each fail in one sentence that says "certificate", at once (no retries).
"""

from __future__ import annotations

import hashlib
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub.utils import close_session

from app.models.hub import download_entry, list_gguf_files
from app.platform.errors import HubUnreachableError
from tests.core.test_download_tls import certificate as tls_certificate  # noqa: F401 (fixture)
from tests.hub_server import HubServer

REPO = "acme/cert-GGUF"
NAME = "cert-Q8_0.gguf"


@pytest.fixture
def hub(tls_certificate: tuple[Path, Path]) -> Iterator[HubServer]:  # noqa: F811
    """The fake Hub over HTTPS (replaces tests.hub_fixtures' `hub`, so `hub_env` uses it)."""
    cert, key = tls_certificate
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    close_session()
    try:
        with HubServer(tls=server_ctx) as server:
            yield server
    finally:
        close_session()  # later tests get a client made with the usual store


def trusting(monkeypatch: pytest.MonkeyPatch, cert: Path | None) -> None:
    """huggingface_hub's next client trusts `cert` (None: the system's usual store)."""
    if cert is None:
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    else:
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    close_session()  # the client reads the store when it is made


def test_an_untrusted_certificate_is_named_as_one(
    hub_env: HubServer,
    tiny_gguf,
    tls_certificate,  # noqa: F811 (the imported fixture)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = tiny_gguf(NAME)
    hub_env.add_repo(REPO, {NAME: source})
    trusting(monkeypatch, tls_certificate[0])
    entry = list_gguf_files(REPO).pick("Q8_0")  # trusted: works over HTTPS

    trusting(monkeypatch, None)
    # (The Models page's header read says the same, after huggingface_hub's own retries.)
    for attempt in (lambda: list_gguf_files(REPO), lambda: download_entry(entry)):
        with pytest.raises(HubUnreachableError) as raised:
            attempt()
        words = str(raised.value)
        assert "certificate" in words and "network connection" not in words, words
        assert words.count(". ") == 0 and words.endswith("."), words  # one sentence
    heads = [r for r in hub_env.log if r.method == "HEAD"]
    assert len(heads) <= 1  # the trusted listing's, if any: no retries of a refused handshake

    trusting(monkeypatch, tls_certificate[0])  # the certificate added: the same download works
    path = download_entry(entry)
    assert (
        hashlib.sha256(path.read_bytes()).digest() == hashlib.sha256(source.read_bytes()).digest()
    )
