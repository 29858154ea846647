"""Ways the backend tests change a real package (unpack, flip a byte, re-sign, repack), and how
they read which libllama a process runs."""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

from app.backends.manifest import MANIFEST_NAME, parse_manifest


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


def rewrite_manifest(folder: Path) -> None:
    """Make the manifest agree with the folder's files again (a package built that way)."""
    from dataclasses import replace

    from app.backends.manifest import PackageFile, sha256_file

    manifest = parse_manifest((folder / MANIFEST_NAME).read_text())
    files = {
        p.name: PackageFile(sha256_file(p), p.stat().st_size)
        for p in folder.iterdir()
        if p.name != MANIFEST_NAME
    }
    (folder / MANIFEST_NAME).write_text(replace(manifest, files=files).to_json())


def copy_package(archive: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "copy"
    shutil.rmtree(dest, ignore_errors=True)
    return unpack(archive, dest)


def mapped_libllama(pid: int) -> Path:
    """The libllama file process `pid` has mapped."""
    from app.engine.devices import loaded_library

    found = loaded_library("llama", pid)
    assert found is not None, f"process {pid} has no libllama mapped"
    return found
