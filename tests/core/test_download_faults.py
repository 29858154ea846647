"""Each network or disk fault ends in a verified file or one clear sentence, never a corrupt
file in the library. The faults are injected by the fake Hub (tests/hub_server.py)."""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.models.download_queue import DownloadQueue
from app.models.download_state import DownloadState
from app.models.hub import (
    download_entry,
    list_gguf_files,
    partial_paths,
    save_token,
    transfer,
)
from app.models.hub.client import GgufEntry
from app.models.library import list_models
from app.models.model_folders import ModelFolders
from app.platform.errors import (
    ChecksumMismatchError,
    DiskFullError,
    DownloadError,
    GatedRepoError,
    UnsafePathError,
)

REPO = "acme/tiny-GGUF"
NAME = "tiny-Q8_0.gguf"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def published(hub_env, tiny_gguf):
    """A ~870 KB real GGUF published as acme/tiny-GGUF/tiny-Q8_0.gguf."""
    source = tiny_gguf(NAME)
    repo = hub_env.add_repo(REPO, {NAME: source})
    return hub_env, repo.files[NAME]


@pytest.fixture
def fast_retries(monkeypatch):
    monkeypatch.setattr(transfer, "BACKOFF_START_S", 0.01)
    monkeypatch.setattr(transfer, "BACKOFF_MAX_S", 0.05)


def _entry() -> GgufEntry:
    return list_gguf_files(REPO).pick("Q8_0")


def _sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _queue(**kwargs) -> DownloadQueue:
    """The queue the app runs (app/services/downloads.py shows it), on the test's data folder."""
    return DownloadQueue(ModelFolders.of_app(), **kwargs)


def _cdn_gets(hub) -> list:
    hub.wait_idle()
    return [r for r in hub.log if r.method == "GET" and "/cdn/" in r.path]


def _assert_library_clean(hub) -> None:
    """Every model the library lists is byte-identical to a file the Hub serves."""
    served = {f.sha256 for repo in hub.repos.values() for f in repo.files.values()}
    for model in list_models(include_starter=False):
        assert model.error is None, model
        if model.n_parts == 1:
            assert _sha(model.path) in served, f"corrupt file in the library: {model.path}"


def test_connection_cut_mid_file_resumes_from_the_bytes_on_disk(published) -> None:
    hub, f = published
    hub.faults.cut_after[NAME] = [300_000]
    path = download_entry(_entry())
    assert _sha(path) == f.sha256
    gets = _cdn_gets(hub)
    assert [g.range for g in gets] == [None, "bytes=300000-"]
    assert hub.bytes_sent() == f.size  # nothing fetched twice
    _assert_library_clean(hub)


def test_503_then_success(published, fast_retries) -> None:
    hub, f = published
    hub.faults.status_first[NAME] = [503, 503]
    path = download_entry(_entry())
    assert _sha(path) == f.sha256
    assert [g.status for g in _cdn_gets(hub)] == [503, 503, 200]


def test_server_that_ignores_range_still_gives_a_verified_file(published) -> None:
    hub, f = published
    hub.faults.cut_after[NAME] = [300_000]
    hub.faults.ignore_range(NAME)
    path = download_entry(_entry())
    assert _sha(path) == f.sha256
    gets = _cdn_gets(hub)
    assert gets[1].range == "bytes=300000-" and gets[1].status == 200  # whole body again
    assert hub.bytes_sent() == 300_000 + f.size
    _assert_library_clean(hub)


def test_truncated_body_is_completed_with_a_range_request(published) -> None:
    hub, f = published
    hub.faults.truncate[NAME] = [400_000]
    path = download_entry(_entry())
    assert _sha(path) == f.sha256
    assert [g.range for g in _cdn_gets(hub)] == [None, "bytes=400000-"]


def test_a_connection_that_never_progresses_fails_in_words_and_keeps_the_partial(
    published, fast_retries
) -> None:
    hub, f = published
    hub.faults.cut_after[NAME] = [200_000] + [0] * 20
    with pytest.raises(DownloadError, match="failed after 6 tries.*partial file is kept"):
        download_entry(_entry())
    (partial,) = partial_paths(_entry())
    assert partial.stat().st_size == 200_000
    hub.faults.clear()
    assert _sha(download_entry(_entry())) == f.sha256
    assert hub.bytes_sent() == f.size


def test_wrong_sha256_deletes_the_file_and_says_so(published, tmp_path) -> None:
    hub, _ = published
    hub.faults.wrong_sha256(NAME)
    with pytest.raises(ChecksumMismatchError, match="failed its checksum.*deleted"):
        download_entry(_entry())
    storage = tmp_path / "hf-cache" / "models--acme--tiny-GGUF"
    assert [p.name for p in (storage / "blobs").iterdir()] == []
    assert not (storage / "snapshots").exists() or not any((storage / "snapshots").rglob("*.gguf"))
    assert list_models(include_starter=False) == []


def test_gated_repo_needs_a_token_with_access(hub_env, tiny_gguf, monkeypatch, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    repo = hub_env.add_repo(
        "meta/locked-GGUF", {"locked-Q8_0.gguf": tiny_gguf("l.gguf")}, gated=True
    )
    entry = list_gguf_files("meta/locked-GGUF").entries[0]  # the tree is public, the files are not
    with pytest.raises(GatedRepoError, match="gated or private: add a Hugging Face access token"):
        download_entry(entry)
    monkeypatch.setenv("HF_TOKEN", "hf_token_without_access")
    with pytest.raises(GatedRepoError, match="no access to 'meta/locked-GGUF'"):
        download_entry(entry)
    monkeypatch.delenv("HF_TOKEN")
    good = next(iter(hub_env.tokens))
    token_file = save_token(good)
    assert token_file.stat().st_mode & 0o777 == 0o600
    path = download_entry(entry)
    assert _sha(path) == repo.files["locked-Q8_0.gguf"].sha256
    assert not any(r.authorized for r in _cdn_gets(hub_env)), "the token must not go to the CDN"
    assert good not in caplog.text and "hf_token_without_access" not in caplog.text


def test_split_model_is_downloaded_whole_and_listed_once(hub_env, tiny_gguf) -> None:
    part1 = tiny_gguf("p1.gguf").read_bytes()
    part2 = os.urandom(300_000)
    hub_env.add_repo(
        "acme/big-GGUF",
        {
            "Q8_0/big-Q8_0-00001-of-00002.gguf": part1,
            "Q8_0/big-Q8_0-00002-of-00002.gguf": part2,
        },
    )
    entry = list_gguf_files("acme/big-GGUF").pick("Q8_0")
    assert entry.is_split
    path = download_entry(entry)
    assert path.name == "big-Q8_0-00001-of-00002.gguf"
    assert path.with_name("big-Q8_0-00002-of-00002.gguf").read_bytes() == part2
    (model,) = list_models(include_starter=False)
    assert (model.path, model.n_parts, model.file_size, model.name) == (
        path,
        2,
        len(part1) + len(part2),
        "big-Q8_0",
    )


@pytest.mark.parametrize(
    "evil", ["../../evil-Q8_0.gguf", "/tmp/evil-Q8_0.gguf", "a/../../evil-Q8_0.gguf"]
)
def test_path_traversal_names_are_refused(hub_env, tiny_gguf, tmp_path, evil) -> None:
    hub_env.add_repo("evil/repo-GGUF", {evil: tiny_gguf("e.gguf")})
    entry = list_gguf_files("evil/repo-GGUF").entries[0]
    before = set(tmp_path.rglob("*"))
    with pytest.raises(UnsafePathError, match="outside the model folder"):
        download_entry(entry)
    with pytest.raises(UnsafePathError):
        download_entry(entry, folder=tmp_path / "lib")
    assert not any("evil" in p.name for p in set(tmp_path.rglob("*")) - before)
    assert not Path("/tmp/evil-Q8_0.gguf").exists()
    assert not any("/cdn/" in r.path or "/resolve/" in r.path for r in hub_env.log)


def test_a_symlinked_folder_leading_outside_is_refused(hub_env, tiny_gguf, tmp_path) -> None:
    hub_env.add_repo("acme/sub-GGUF", {"sub/x-Q8_0.gguf": tiny_gguf("x.gguf")})
    outside = tmp_path / "outside"
    outside.mkdir()
    repo_dir = tmp_path / "lib" / "acme" / "sub-GGUF"
    repo_dir.mkdir(parents=True)
    (repo_dir / "sub").symlink_to(outside)
    entry = list_gguf_files("acme/sub-GGUF").entries[0]
    with pytest.raises(UnsafePathError, match="link that leaves"):
        download_entry(entry, folder=tmp_path / "lib")
    assert list(outside.iterdir()) == []


def test_too_little_free_space_is_refused_before_downloading(
    published, small_fs, monkeypatch
) -> None:
    hub, _ = published
    monkeypatch.setenv("HF_HUB_CACHE", str(small_fs(256 * 1024)))
    with pytest.raises(DiskFullError, match="Not enough disk space"):
        download_entry(_entry())
    assert _cdn_gets(hub) == []


def test_disk_full_mid_way_keeps_the_partial_and_resumes(published, small_fs, monkeypatch) -> None:
    hub, f = published
    cache = small_fs(2 * 1024 * 1024)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    hub.faults.rate_limit[NAME] = 1_000_000
    filler = cache / "filler"

    def fill_disk_once(done: int, total: int) -> None:
        if done > 100_000 and not filler.exists():
            import shutil

            free = shutil.disk_usage(cache).free
            with open(filler, "wb") as out:
                out.write(b"\0" * (free - 150_000))

    with pytest.raises(DiskFullError, match="disk filled up.*resume"):
        download_entry(_entry(), on_progress=fill_disk_once)
    (partial,) = partial_paths(_entry())
    kept = partial.stat().st_size
    assert 100_000 < kept < f.size
    assert list_models(include_starter=False) == []
    filler.unlink()
    hub.faults.clear()
    path = download_entry(_entry())
    assert _sha(path) == f.sha256
    assert _cdn_gets(hub)[-1].range == f"bytes={kept}-"


_DOWNLOAD_UNDER_A_FILE_SIZE_LIMIT = r"""
import resource, signal, sys
# The kernel refuses any write past byte N of a file (EFBIG; SIGXFSZ ignored so the write
# fails instead of killing the process), as a full disk refuses one (ENOSPC).
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), hard))
from app.platform.errors import DiskFullError
from app.models.hub import download_entry, list_gguf_files
try:
    download_entry(list_gguf_files(sys.argv[2]).pick("Q8_0"))
except DiskFullError as error:
    print(error)
    raise SystemExit(3)
"""


def test_a_write_refused_at_byte_n_keeps_n_bytes_and_resumes_from_there(published) -> None:
    """No root needed: RLIMIT_FSIZE makes the kernel refuse the real download's write at
    byte N, in a subprocess, through the real download path."""
    pytest.importorskip("resource")
    hub, f = published
    limit = 300_000
    done = subprocess.run(
        [sys.executable, "-c", _DOWNLOAD_UNDER_A_FILE_SIZE_LIMIT, str(limit), REPO],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert "filled up" in done.stdout and "resume" in done.stdout
    (partial,) = partial_paths(_entry())
    assert partial.stat().st_size == limit  # every byte up to the refused one is kept
    assert list_models(include_starter=False) == []
    path = download_entry(_entry())
    assert _sha(path) == f.sha256
    assert _cdn_gets(hub)[-1].range == f"bytes={limit}-"


@pytest.mark.slow
def test_pause_resume_cancel(hub_env, tiny_gguf) -> None:
    a, b = tiny_gguf("a.gguf", seed=1), tiny_gguf("b.gguf", seed=2)
    hub_env.add_repo("acme/two-GGUF", {"a-Q8_0.gguf": a, "b-Q4_0.gguf": b})
    hub_env.faults.rate_limit["a-Q8_0.gguf"] = 1_000_000
    hub_env.faults.rate_limit["b-Q4_0.gguf"] = 1_000_000
    files = list_gguf_files("acme/two-GGUF")
    third = threading.Event()
    queue = _queue(on_change=lambda d: d.done_bytes > 0.3 * d.total_bytes and third.set())
    try:
        job_a = queue.enqueue(files.pick("Q8_0"))
        assert third.wait(10)
        t0 = time.monotonic()
        queue.pause(job_a)
        paused = queue.wait(job_a, timeout=5)
        assert paused.state is DownloadState.PAUSED
        assert time.monotonic() - t0 < 1.0, "pause must act quickly"
        (partial,) = partial_paths(files.pick("Q8_0"))
        kept = partial.stat().st_size
        assert kept > 0.3 * a.stat().st_size and paused.done_bytes == kept
        queue.resume(job_a)
        done = queue.wait(job_a, timeout=30)
        assert done.state is DownloadState.FINISHED and _sha(done.model.path) == _sha(a)
        resumed = [g for g in _cdn_gets(hub_env) if g.path.split("/cdn/")[1].startswith(_sha(a))]
        assert resumed[-1].range == f"bytes={kept}-"

        job_b = queue.enqueue(files.pick("Q4_0"))
        third.clear()
        assert third.wait(10)
        queue.cancel(job_b)
        cancelled = queue.wait(job_b, timeout=5)
        assert cancelled.state is DownloadState.CANCELLED
        assert not any(p.exists() for p in partial_paths(files.pick("Q4_0")))
    finally:
        queue.close()
    assert [m.name for m in list_models(include_starter=False)] == ["a-Q8_0"]


_CHILD = """
import sys, threading
from pathlib import Path
from app.models.download_queue import DownloadQueue
from app.models.hub import list_gguf_files
from app.models.model_folders import ModelFolders
queue = DownloadQueue(ModelFolders.of_app(), state_file=Path(sys.argv[1]))
queue.enqueue(list_gguf_files(sys.argv[2]).pick(sys.argv[3]))
threading.Event().wait()  # until killed
"""


@pytest.mark.slow
def test_killed_and_restarted_the_queue_resumes_from_the_partial_file(published, tmp_path) -> None:
    hub, f = published
    hub.faults.rate_limit[NAME] = 500_000
    saved = tmp_path / "kvstudio-data" / "downloads.json"
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(saved), REPO, "Q8_0"], cwd=ROOT, env=os.environ.copy()
    )
    (partial,) = partial_paths(_entry())
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (
        not partial.exists() or partial.stat().st_size < 0.4 * f.size
    ):
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)  # a crash or a hard quit: no cleanup runs
    child.wait()
    kept = partial.stat().st_size
    assert 0 < kept < f.size
    hub.faults.clear()
    queue = _queue(state_file=saved)
    try:
        (key,) = queue.restore()  # it was downloading when killed: it continues by itself
        done = queue.wait(key, timeout=30)
    finally:
        queue.close()
    assert done.state is DownloadState.FINISHED and _sha(done.model.path) == f.sha256
    assert _cdn_gets(hub)[-1].range == f"bytes={kept}-"


def test_hub_errors_on_the_metadata_request_are_retried(published, fast_retries) -> None:
    hub, f = published
    hub.faults.resolve_status_first[NAME] = [503, 502]
    assert _sha(download_entry(_entry())) == f.sha256
    heads = [r.status for r in hub.log if r.method == "HEAD"]
    assert heads == [503, 502, 302]


def test_pause_acts_while_waiting_to_retry(published) -> None:
    hub, _ = published
    hub.faults.resolve_status_first[NAME] = [503] * 20
    queue = _queue()
    try:
        job = queue.enqueue(_entry())
        deadline = time.monotonic() + 10
        while not any(r.status == 503 for r in hub.log) and time.monotonic() < deadline:
            time.sleep(0.01)
        t0 = time.monotonic()
        queue.pause(job)
        assert queue.wait(job, timeout=5).state is DownloadState.PAUSED
        assert time.monotonic() - t0 < 1.0
        hub.faults.clear()
        queue.resume(job)
        assert queue.wait(job, timeout=30).state is DownloadState.FINISHED
    finally:
        queue.close()


def test_the_same_file_is_never_written_by_two_downloads_at_once(published) -> None:
    hub, f = published
    hub.faults.rate_limit[NAME] = 1_000_000
    results: list[object] = []
    first = threading.Thread(target=lambda: results.append(download_entry(_entry())))
    first.start()
    (partial,) = partial_paths(_entry())
    deadline = time.monotonic() + 10
    while not partial.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(DownloadError, match="already being downloaded"):
        download_entry(_entry())
    first.join(30)
    assert _sha(results[0]) == f.sha256


def test_pause_and_cancel_act_at_once_on_a_stalled_connection(published) -> None:
    hub, _ = published
    hub.faults.stall_after[NAME] = [200_000, 200_000]
    (partial,) = partial_paths(_entry())

    def wait_for_stall(size: int) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if partial.exists() and partial.stat().st_size >= size:
                time.sleep(0.2)  # now the server sends nothing more
                return
            time.sleep(0.01)
        raise AssertionError("the download never reached the stall")

    queue = _queue()
    try:
        job = queue.enqueue(_entry())
        wait_for_stall(200_000)
        t0 = time.monotonic()
        queue.pause(job)
        assert queue.wait(job, timeout=5).state is DownloadState.PAUSED
        assert time.monotonic() - t0 < 1.0, "pause must not wait for the read timeout"
        assert partial.stat().st_size == 200_000
        queue.resume(job)
        wait_for_stall(400_000)
        t0 = time.monotonic()
        queue.cancel(job)
        assert queue.wait(job, timeout=5).state is DownloadState.CANCELLED
        assert time.monotonic() - t0 < 1.0
        assert not partial.exists()
    finally:
        queue.close()
