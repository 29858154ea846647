"""Ways the backend tests change a real package (unpack, flip a byte, re-sign, repack), and how
they read which libllama a process runs.

Packages are signed (app/backends/signing.py). The tests sign with a key made for this test
process (`test_key`), which the app trusts only through the developer setting
KVSTUDIO_DEV_TRUSTED_KEYS: `trust_test_key` points it at a file holding that key's public half.
"""

from __future__ import annotations

import functools
import os
import shutil
import tarfile
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.backends.manifest import MANIFEST_NAME, SIGNATURE_NAME, parse_manifest
from app.backends.signing import DEV_KEYS_ENV, public_key_line, sign_manifest


@functools.cache
def test_key() -> Ed25519PrivateKey:
    """This test process's signing key (made once, never written to the repository)."""
    return Ed25519PrivateKey.generate()


def trust_test_key(folder: Path) -> dict[str, str]:
    """Write the test key's public line into `folder` and set KVSTUDIO_DEV_TRUSTED_KEYS to it in
    this process (children inherit it); returns the variable, for a child's env."""
    keys = folder / "trusted-test-keys.txt"
    keys.write_text(public_key_line(test_key(), "kvstudio-tests") + "\n")
    os.environ[DEV_KEYS_ENV] = str(keys)
    return {DEV_KEYS_ENV: str(keys)}


def sign(folder: Path, key: Ed25519PrivateKey | None = None) -> None:
    """Sign the folder's manifest as the release script does (the test key by default)."""
    manifest = (folder / MANIFEST_NAME).read_bytes()
    signature = sign_manifest(key or test_key(), manifest)
    (folder / SIGNATURE_NAME).write_text(signature.to_json())


def unpack(archive: Path, dest: Path) -> Path:
    """The package folder from an archive (for tests that alter it)."""
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    return dest / "cpu"


def repack(folder: Path, archive: Path) -> Path:
    from kernels.package import write_archive

    write_archive(folder, archive)
    return archive


def flip_a_byte(path: Path, offset: int = 4096) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def rewrite_manifest(folder: Path, **changes: object) -> None:
    """Make the manifest agree with the folder's files again, with `changes` to its fields, and
    sign it with the test key (a package built and signed that way)."""
    from dataclasses import replace

    from app.backends.manifest import PackageFile, sha256_file

    manifest = parse_manifest((folder / MANIFEST_NAME).read_text())
    files = {
        p.name: PackageFile(sha256_file(p), p.stat().st_size)
        for p in folder.iterdir()
        if p.name not in (MANIFEST_NAME, SIGNATURE_NAME)
    }
    changed = replace(manifest, files=files, **changes)  # type: ignore[arg-type]  # test fields
    (folder / MANIFEST_NAME).write_text(changed.to_json())
    sign(folder)


def copy_package(archive: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "copy"
    shutil.rmtree(dest, ignore_errors=True)
    return unpack(archive, dest)


def signed_copy(archive: Path, dest: Path) -> Path:
    """The package in `archive` signed with the test key, as an archive in `dest`."""
    folder = copy_package(archive, dest)
    sign(folder)
    return repack(folder, dest / archive.name)


def mapped_libllama(pid: int) -> Path:
    """The libllama file process `pid` has mapped."""
    from app.engine.devices import loaded_library

    found = loaded_library("llama", pid)
    assert found is not None, f"process {pid} has no libllama mapped"
    return found
