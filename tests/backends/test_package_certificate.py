"""A certificate this computer does not trust is named as one when a backend package or the
package index is fetched, as the Hub's downloads name it: behind a network that inspects HTTPS
the fix is adding its certificate, not checking the connection.

The release assets are served over HTTPS on 127.0.0.1 with a self-signed certificate made here.
With the system's usual certificate store, which does not hold it, `kvstudio backend add
https://…`, the index and a download through the index each fail in one sentence that says
"certificate", before any request reaches the server and with nothing left in the backends
folder. Trusted through SSL_CERT_FILE (OpenSSL's variable for the system store), the same
requests go through: the index is read, and the stand-in archive is downloaded and then refused
for what it is, not for its certificate.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import ipaddress
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from huggingface_hub.utils import close_session

from app.backends.index_install import fetch_index, install_entry
from app.backends.package_archive import platform_tag
from app.backends.package_index import IndexEntry, index_json
from app.backends.signing import trusted_keys
from app.backends.store import BUILT_IN, BackendStore
from app.engine.backend_probe import probe
from app.platform.errors import DownloadError
from tests.backends.release_server import ReleaseServer
from tests.cli_runner import assert_bad_input, kvstudio

ARCHIVE = "kvstudio-backend-cpu-0.3.36-linux-x86_64.tar.gz"
STAND_IN = b"a stand-in for a package archive: it is never read as one over an untrusted link"


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(cert.pem, key.pem): a self-signed certificate for IP 127.0.0.1."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("tls")
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def index_entry(url: str) -> IndexEntry:
    """An index entry for the stand-in, signed (the index says) with a key the app trusts."""
    return IndexEntry(
        variant="cpu",
        version="0.2.0",
        platform=platform_tag(),
        targets=(),
        kernel="",
        summary="CPU",
        sha256=hashlib.sha256(STAND_IN).hexdigest(),
        size=len(STAND_IN),
        key=trusted_keys()[0].key_id,
        signature=base64.b64encode(bytes(64)).decode("ascii"),
        url=url,
    )


@pytest.fixture
def https_release(
    certificate: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ReleaseServer]:
    """The stand-in archive and an index naming it, served over HTTPS; the system's usual
    certificate store in use (it does not hold the certificate)."""
    folder = tmp_path / "assets"
    folder.mkdir()
    (folder / ARCHIVE).write_bytes(STAND_IN)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    trusting(monkeypatch, None)
    try:
        with ReleaseServer(folder, tls=context) as server:
            index = index_json([index_entry(f"{server.url}/{ARCHIVE}")])
            (folder / "backends.json").write_text(index, encoding="utf-8")
            yield server
    finally:
        close_session()  # later tests get a client made with the usual store


def trusting(monkeypatch: pytest.MonkeyPatch, cert: Path | None) -> None:
    """huggingface_hub's next client, and `kvstudio` children, trust `cert` (None: the
    system's usual store)."""
    if cert is None:
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    else:
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    close_session()  # the client reads the store when it is made


def assert_names_the_certificate(words: str) -> None:
    assert "certificate this computer does not trust" in words, words
    assert "127.0.0.1" in words and "network connection" not in words, words
    assert words.count(". ") == 0 and words.endswith("."), words  # one sentence


def test_the_index_on_an_untrusted_server_is_a_certificate_problem(
    https_release: ReleaseServer, certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"{https_release.url}/backends.json"
    with pytest.raises(DownloadError) as refused:
        fetch_index(url)
    assert_names_the_certificate(str(refused.value))
    assert str(refused.value).startswith("The package index's server 127.0.0.1 sent a ")
    assert https_release.log == []  # no request got past the handshake

    trusting(monkeypatch, certificate[0])
    (entry,) = fetch_index(url).entries
    assert entry.variant == "cpu" and entry.url == f"{https_release.url}/{ARCHIVE}"


def test_a_package_from_the_index_on_an_untrusted_server_is_a_certificate_problem(
    https_release: ReleaseServer, store: BackendStore
) -> None:
    entry = index_entry(f"{https_release.url}/{ARCHIVE}")
    with pytest.raises(DownloadError) as refused:
        install_entry(store, entry, probe)
    assert_names_the_certificate(str(refused.value))
    assert https_release.log == []  # not retried: no retry mends a certificate
    assert not store.folder.exists() or list(store.folder.iterdir()) == []
    assert store.chosen_name() == BUILT_IN


def test_backend_add_of_an_address_on_an_untrusted_server_says_certificate(
    https_release: ReleaseServer,
    certificate: tuple[Path, Path],
    data_folder: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = f"{https_release.url}/{ARCHIVE}"
    refused = kvstudio("backend", "add", url)
    assert_bad_input(refused, "certificate")
    assert_names_the_certificate(refused.stderr.strip().removeprefix("kvstudio: "))
    assert https_release.log == []

    trusting(monkeypatch, certificate[0])
    downloaded = kvstudio("backend", "add", url)  # through the handshake, then the archive's check
    assert_bad_input(downloaded, f"{ARCHIVE} is not a .tar.gz backend package.")
    assert [method for method, _name, _range in https_release.log] == ["HEAD", "GET"]
    backends = BackendStore(data_folder).folder
    assert not backends.exists() or list(backends.iterdir()) == []  # the download folder too
