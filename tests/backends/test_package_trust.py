"""A package is trusted only when a key the app trusts signed its manifest and every file matches
it, and none of its code runs before that: the real CPU package, the real probe, and a library
whose constructor writes a marker file (the marker shows whether the package's code ran)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.backends.manifest import MANIFEST_NAME, SIGNATURE_NAME, BadPackageError, read_manifest
from app.backends.signing import SignatureError, UnsignedPackageError
from app.backends.store import BUILT_IN
from app.engine.backend_probe import BackendLoadError, probe
from tests.backends.package_edits import copy_package, repack, rewrite_manifest, sign

EVIL_C = """#include <stdio.h>
__attribute__((constructor)) static void package_code_ran(void) {
    FILE *f = fopen("%s", "w");
    if (f) { fputs("the package's code ran\\n", f); fclose(f); }
}
"""


def one_sentence(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text and text.endswith("."), text
    return text


@pytest.fixture(scope="module")
def evil_library(tmp_path_factory) -> tuple[Path, Path]:
    """A shared library whose constructor writes a marker file when it is loaded, and that file."""
    folder = tmp_path_factory.mktemp("evil")
    marker = folder / "package-code-ran"
    (folder / "evil.c").write_text(EVIL_C % marker)
    library = folder / "libllama.so"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(library), str(folder / "evil.c")], check=True
    )
    return library, marker


def evil_package(cpu_package: Path, tmp_path: Path, library: Path, how: str) -> Path:
    """The CPU package with the marker library as its libllama.so, `how` it was (mis)signed."""
    folder = copy_package(cpu_package, tmp_path)
    (folder / "libllama.so").write_bytes(library.read_bytes())
    if how == "tampered":  # the manifest and signature of the real package, kept as they were
        return repack(folder, tmp_path / "evil.tar.gz")
    rewrite_manifest(folder)  # a manifest that names the evil library honestly, signed
    if how == "unsigned":
        (folder / SIGNATURE_NAME).unlink()
    elif how == "unknown key":
        sign(folder, Ed25519PrivateKey.generate())
    elif how == "wrong signature":  # edited after signing
        text = (folder / MANIFEST_NAME).read_text()
        (folder / MANIFEST_NAME).write_text(text.replace('"summary": "', '"summary": "Signed: '))
    return repack(folder, tmp_path / "evil.tar.gz")


def test_the_marker_library_does_write_its_marker_when_loaded(evil_library, tmp_path):
    """The check the tests below rely on: loading the library runs its code."""
    library, marker = evil_library
    subprocess.run(
        [sys.executable, "-c", f"import ctypes; ctypes.CDLL({str(library)!r})"], check=True
    )
    assert marker.is_file()
    marker.unlink()


@pytest.mark.parametrize(
    ("how", "refusal", "words"),
    [
        ("tampered", BadPackageError, "where its manifest says"),
        ("unsigned", UnsignedPackageError, "is not signed, so it was not installed"),
        ("unknown key", SignatureError, "which this app does not trust"),
        ("wrong signature", SignatureError, "does not match its signature"),
    ],
)
def test_a_package_not_signed_as_it_is_never_runs_its_code(
    store, cpu_package, tmp_path, evil_library, how, refusal, words
):
    library, marker = evil_library
    archive = evil_package(cpu_package, tmp_path, library, how)
    with pytest.raises(refusal) as refused:
        store.add(archive, probe)
    assert words in one_sentence(refused.value)
    assert not marker.exists()
    assert list(store.folder.iterdir()) == []  # the staging folder is gone, nothing installed
    assert store.chosen_name() == BUILT_IN


def test_allow_unsigned_installs_a_package_its_builder_vouches_for(
    store, unsigned_cpu_package, cpu_package, tmp_path, evil_library
):
    with pytest.raises(UnsignedPackageError):
        store.add(unsigned_cpu_package, probe)
    added = store.add(unsigned_cpu_package, probe, allow_unsigned=True)
    assert added.name == "cpu" and added.folder is not None
    assert not (added.folder / SIGNATURE_NAME).exists()
    store.use("cpu", probe)
    assert store.for_engine() == (store.get("cpu"), None)
    # Only the signature is waived: a package whose bytes do not match its manifest is refused,
    # and the marker library shows that it is loaded only by the test load after the checks.
    library, marker = evil_library
    unsigned_evil = evil_package(cpu_package, tmp_path, library, "unsigned")
    with pytest.raises(BackendLoadError):
        store.add(unsigned_evil, probe, allow_unsigned=True)
    assert marker.is_file()
    marker.unlink()
    assert store.chosen_name() == "cpu" and read_manifest(store.folder / "cpu").name == "cpu"


def test_the_release_keys_and_a_developer_key_file_are_what_the_app_trusts(tmp_path, monkeypatch):
    from app.backends.signing import DEV_KEYS_ENV, public_key_line, trusted_keys
    from app.platform.errors import BadInputError

    monkeypatch.delenv(DEV_KEYS_ENV, raising=False)
    shipped = trusted_keys()
    assert [k.name for k in shipped] == ["kvstudio-release-1"]
    assert shipped[0].key_id == "5d080de67a79c4fc" and shipped[0].source == "built in"
    key = Ed25519PrivateKey.generate()
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text(f"# my builds\n{public_key_line(key, 'my-builds')}\n")
    monkeypatch.setenv(DEV_KEYS_ENV, str(keys_file))
    assert [k.name for k in trusted_keys()] == ["kvstudio-release-1", "my-builds"]
    keys_file.write_text("ed25519 not-a-key\n")
    with pytest.raises(BadInputError) as refused:
        trusted_keys()
    assert "Line 1 of" in one_sentence(refused.value)
