"""`kvstudio pull` of a name no disk can hold, what a failed download leaves, and what `rm`
deletes (issue 11, secrets and files): one sentence and nothing left, leftovers always
removable by repo, and never a file outside the library through a link."""

from __future__ import annotations

import hashlib
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_runner import ROOT
from tests.cli_runner import kvstudio as run_kvstudio

AREA = "Secrets and files"
LONG_NAME = "a" * 290 + "-Q8_0.gguf"  # 300 characters: more than one folder entry can hold


def kvstudio(*args: str) -> subprocess.CompletedProcess[str]:
    return run_kvstudio(*args, timeout=60)


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("kvstudio: ")
    return line


def files_under(folder: Path) -> list[Path]:
    return (
        [p for p in folder.rglob("*") if p.is_file() or p.is_symlink()] if folder.exists() else []
    )


def test_a_300_character_file_name_is_one_sentence_and_leaves_nothing(
    hub_env, tiny_gguf, tmp_path, reliability
) -> None:
    """Failed before issue 11: the file was downloaded into blobs/, then linking it under its
    name failed (ENAMETOOLONG), leaving a blob `ls` and `rm` could not see."""
    hub_env.add_repo("acme/long-GGUF", {LONG_NAME: tiny_gguf("long.gguf")})
    for where in ([], ["--folder", str(tmp_path / "lib")]):
        line = one_error_line(kvstudio("pull", "acme/long-GGUF:Q8_0", *where))
        assert "300 characters long, more than a disk allows" in line and len(line) < 300
    assert files_under(tmp_path / "hf-cache") == [] and files_under(tmp_path / "lib") == []
    hub_env.wait_idle()
    assert not any("/cdn/" in r.path for r in hub_env.log)
    reliability.record(AREA, "300-character file name: files left after pull (cache + folder)", 0)


def _limit_file_size(limit: int):
    def apply() -> None:
        # The kernel refuses writes past byte `limit` (EFBIG, like a full disk's ENOSPC);
        # SIGXFSZ ignored so the write fails instead of killing the process.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(
            resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1])
        )

    return apply


def test_rm_removes_what_a_failed_download_left(hub_env, tiny_gguf, tmp_path, reliability) -> None:
    """Failed before issue 11: `rm` knew only finished models, so a partial file kept for a
    resume (and a blob no snapshot links to) could be removed only by hand."""
    hub_env.add_repo("acme/tiny-GGUF", {"tiny-Q8_0.gguf": tiny_gguf("t.gguf")})
    pulled = subprocess.run(
        [sys.executable, "-m", "app", "pull", "acme/tiny-GGUF:Q8_0"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        preexec_fn=_limit_file_size(300_000),
        timeout=60,
        check=False,
    )
    assert "disk filled up" in one_error_line(pulled)
    storage = tmp_path / "hf-cache" / "models--acme--tiny-GGUF"
    (partial,) = [p for p in files_under(storage) if p.name.endswith(".incomplete")]
    assert partial.stat().st_size == 300_000
    assert "acme/tiny-GGUF" not in kvstudio("ls").stdout

    removed = kvstudio("rm", "acme/tiny-GGUF:Q8_0")
    assert removed.returncode == 0, removed.stderr
    assert "unfinished downloads of acme/tiny-GGUF left: 1 file (292.97 KiB)" in removed.stdout
    assert not storage.exists()

    # A blob whose snapshot link is missing (a kill between the rename and the link).
    path = Path(kvstudio("pull", "acme/tiny-GGUF:Q8_0").stdout.strip())
    blob = path.resolve()
    path.unlink()
    assert "acme/tiny-GGUF" not in kvstudio("ls").stdout
    assert kvstudio("rm", "acme/tiny-GGUF").returncode == 0
    assert not blob.exists() and not storage.exists()
    assert "No model named" in one_error_line(kvstudio("rm", "acme/tiny-GGUF"))
    reliability.record(
        AREA, "failed downloads `rm` could not remove", "0 of 2 (partial, unlinked blob)"
    )


def _outside_gguf(tiny_gguf, tmp_path: Path) -> tuple[Path, str]:
    precious = tmp_path / "outside" / "precious-Q8_0.gguf"
    precious.parent.mkdir()
    tiny_gguf("p.gguf").rename(precious)
    return precious, hashlib.sha256(precious.read_bytes()).hexdigest()


def test_rm_of_a_cache_link_out_of_the_library_keeps_its_target(
    hub_env, tiny_gguf, tmp_path, reliability
) -> None:
    """Failed before issue 11: deleting a cache model unlinked the file its snapshot entry
    resolved to, wherever that was."""
    precious, digest = _outside_gguf(tiny_gguf, tmp_path)
    snapshot = tmp_path / "hf-cache" / "models--evil--link-GGUF" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "link-Q8_0.gguf").symlink_to(precious)
    assert "evil/link-GGUF" in kvstudio("ls").stdout
    assert kvstudio("rm", "evil/link-GGUF:Q8_0").returncode == 0
    assert not (snapshot / "link-Q8_0.gguf").is_symlink()
    assert hashlib.sha256(precious.read_bytes()).hexdigest() == digest
    reliability.record(AREA, "links out of the library followed by rm (cache, folder)", "0 of 2")


def test_rm_of_a_folder_link_keeps_its_target(hub_env, tiny_gguf, tmp_path) -> None:
    # Held before issue 11: a model in a folder is unlinked, which removes a link, not its
    # target.
    precious, digest = _outside_gguf(tiny_gguf, tmp_path)
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "mine-Q8_0.gguf").symlink_to(precious)
    assert kvstudio("rm", "mine-Q8_0", "--dir", str(folder)).returncode == 0
    assert not (folder / "mine-Q8_0.gguf").is_symlink()
    assert hashlib.sha256(precious.read_bytes()).hexdigest() == digest


# Over a second per test on 2 cores: in the full suite, not the fast tier (docs/testing.md).
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks"),
]
