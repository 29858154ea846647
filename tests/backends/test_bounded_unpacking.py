"""Unpacking is bounded by the signed manifest: archives that would expand to gigabytes (a few
megabytes of gzip, tests/backends/archive_bombs.py) are refused after reading a sliver of them,
with one sentence, and nothing is left outside the staging folder, which is removed."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from app.backends.manifest import MANIFEST_NAME, SIGNATURE_NAME, BadPackageError
from app.engine.backend_probe import probe
from tests.backends.archive_bombs import bomb, bytes_read_by_this_process, tar_file, tar_header
from tests.backends.package_edits import copy_package

GIB = 1 << 30


def signed_head(cpu_package: Path, tmp_path: Path) -> tuple[bytes, dict]:
    """The real package's signed manifest and signature as the first two tar members."""
    folder = copy_package(cpu_package, tmp_path)
    manifest = (folder / MANIFEST_NAME).read_bytes()
    head = tar_file(f"cpu/{MANIFEST_NAME}", manifest)
    head += tar_file(f"cpu/{SIGNATURE_NAME}", (folder / SIGNATURE_NAME).read_bytes())
    return head, json.loads(manifest)


def unsigned_manifest(data: dict, files: dict[str, int]) -> bytes:
    data = dict(data)
    data["files"] = {name: {"sha256": "0" * 64, "size": size} for name, size in files.items()}
    return json.dumps(data).encode()


def bombs(head: bytes, manifest: dict) -> dict[str, tuple[bytes, bool, str]]:
    """name: (tar bytes before 4 GiB of zeros, --allow-unsigned, the refusal's words)."""
    return {
        "a library larger than its signed manifest says": (
            head + tar_header("cpu/libllama.so", 4 * GIB),
            False,
            "where its manifest says",
        ),
        "a 4 GiB pax header after the signed manifest": (
            head + tar_header("cpu/././@PaxHeader", 4 * GIB, tarfile.XHDTYPE),
            False,
            "tar header larger than a package's",
        ),
        "4 GiB before any manifest": (
            tar_header("cpu/libllama.so", 4 * GIB),
            False,
            "has no manifest.json at its start",
        ),
        "an unsigned manifest declaring 16 GiB": (
            tar_file(
                f"cpu/{MANIFEST_NAME}", unsigned_manifest(manifest, {"libllama.so": 16 * GIB})
            ),
            True,
            "unpacks to more than a backend package can be",
        ),
        "a file the signed manifest does not name": (
            head + tar_header("cpu/libggml-hip.so", 4 * GIB),
            False,
            "its signed manifest does not name it",
        ),
    }


@pytest.mark.parametrize("case", list(bombs(b"", {})))
def test_an_archive_bomb_is_refused_after_reading_a_sliver_of_it(
    store, cpu_package, tmp_path, case
):
    head, manifest = signed_head(cpu_package, tmp_path)
    tar_bytes, allow_unsigned, words = bombs(head, manifest)[case]
    archive = bomb(tmp_path / "kvstudio-backend-cpu-bomb.tar.gz", tar_bytes)
    assert archive.stat().st_size > 3_000_000  # ~4 MB of gzip that expands to 4 GiB

    before = bytes_read_by_this_process()
    with pytest.raises(BadPackageError) as refused:
        store.add(archive, probe, allow_unsigned=allow_unsigned)
    read = bytes_read_by_this_process() - before
    text = str(refused.value)
    assert words in text and "\n" not in text and text.endswith("."), text
    assert read < archive.stat().st_size // 4  # refused long before the end of the file
    assert list(store.folder.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy", "data", archive.name]
    assert [p.name for p in store.data_folder.iterdir()] == ["backends"]


def test_a_signed_archive_whose_stream_runs_past_its_last_file_is_refused(
    store, cpu_package, tmp_path
):
    """Every file as the manifest says, then gigabytes more: tar stops at its end blocks, so the
    extra bytes are never read; the package installs and nothing else is written."""
    folder = copy_package(cpu_package, tmp_path)
    names = [MANIFEST_NAME, SIGNATURE_NAME] + sorted(
        p.name for p in folder.iterdir() if p.name not in (MANIFEST_NAME, SIGNATURE_NAME)
    )
    body = b"".join(tar_file(f"cpu/{n}", (folder / n).read_bytes()) for n in names)
    archive = bomb(tmp_path / "kvstudio-backend-cpu-trailing.tar.gz", body + bytes(1024))
    before = bytes_read_by_this_process()
    added = store.add(archive, probe)
    assert bytes_read_by_this_process() - before < archive.stat().st_size // 2 + 64 * 1024**2
    assert added.name == "cpu"
    assert sorted(p.name for p in store.folder.iterdir()) == ["cpu"]
