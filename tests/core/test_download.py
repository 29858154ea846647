"""Downloads from the fake Hub into the HF cache layout or a chosen folder."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from app.engine.loader import weights_repacked
from app.models.download_queue import DownloadQueue
from app.models.download_state import DownloadState
from app.models.hub import download_entry, list_gguf_files
from app.models.library import list_models
from app.models.model_folders import ModelFolders
from app.platform.errors import HubUnreachableError


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_download_lands_in_the_hf_cache_layout(hub_env, tiny_gguf, tmp_path) -> None:
    source = tiny_gguf("tiny-Q8_0.gguf")
    repo = hub_env.add_repo("acme/tiny-GGUF", {"tiny-Q8_0.gguf": source})
    entry = list_gguf_files("acme/tiny-GGUF").pick("Q8_0")
    seen: list[tuple[int, int]] = []
    path = download_entry(entry, on_progress=lambda done, total: seen.append((done, total)))

    storage = tmp_path / "hf-cache" / "models--acme--tiny-GGUF"
    sha = repo.files["tiny-Q8_0.gguf"].sha256
    assert path == storage / "snapshots" / repo.commit / "tiny-Q8_0.gguf"
    assert path.is_symlink() and os.readlink(path) == f"../../blobs/{sha}"
    assert (storage / "refs" / "main").read_text() == repo.commit
    assert _sha(path) == sha
    assert not list(storage.glob("blobs/*.incomplete"))
    assert seen[-1] == (source.stat().st_size, source.stat().st_size)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    # huggingface_hub itself finds the file in its cache, offline.
    from huggingface_hub import try_to_load_from_cache

    assert try_to_load_from_cache(
        "acme/tiny-GGUF", "tiny-Q8_0.gguf", cache_dir=tmp_path / "hf-cache"
    ) == str(path)


def test_second_download_fetches_nothing(hub_env, tiny_gguf) -> None:
    hub_env.add_repo("acme/tiny-GGUF", {"tiny-Q8_0.gguf": tiny_gguf()})
    entry = list_gguf_files("acme/tiny-GGUF").entries[0]
    first = download_entry(entry)
    sent = hub_env.bytes_sent()
    assert download_entry(entry) == first
    assert hub_env.bytes_sent() == sent


def test_offline_mode_uses_the_cache_and_refuses_new_files(hub_env, tiny_gguf, monkeypatch) -> None:
    hub_env.add_repo(
        "acme/tiny-GGUF",
        {"a-Q8_0.gguf": tiny_gguf("a.gguf"), "b-Q4_0.gguf": tiny_gguf("b.gguf", seed=1)},
    )
    files = list_gguf_files("acme/tiny-GGUF")
    path = download_entry(files.pick("Q8_0"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    requests = len(hub_env.log)
    assert download_entry(files.pick("Q8_0")) == path
    with pytest.raises(HubUnreachableError, match="Offline mode"):
        download_entry(files.pick("Q4_0"))
    assert len(hub_env.log) == requests


def test_download_into_a_chosen_folder_is_listed_in_the_library(
    hub_env, tiny_gguf, tmp_path
) -> None:
    hub_env.add_repo("acme/tiny-GGUF", {"tiny-Q8_0.gguf": tiny_gguf(n_ctx_train=2048)})
    folder = tmp_path / "my-models"
    path = download_entry(list_gguf_files("acme/tiny-GGUF").entries[0], folder=folder)
    assert path == folder / "acme" / "tiny-GGUF" / "tiny-Q8_0.gguf"
    ModelFolders.of_app().add_download_folder(folder)  # the downloader's caller records it
    models = [m for m in list_models(include_starter=False) if m.path == path]
    assert len(models) == 1
    model = models[0]
    assert (model.repo_id, model.architecture, model.context_length, model.quantization) == (
        "acme/tiny-GGUF",
        "llama",
        2048,
        "Q8_0",
    )


def test_queue_runs_two_at_a_time_and_reports_progress(hub_env, tiny_gguf) -> None:
    files = {f"m{i}-Q8_0.gguf": tiny_gguf(f"m{i}.gguf", seed=i) for i in range(3)}
    hub_env.add_repo("acme/three-GGUF", files)
    for name in files:
        hub_env.faults.rate_limit[name] = 2_000_000  # slow enough to overlap
    entries = list_gguf_files("acme/three-GGUF").entries
    events = []
    queue = DownloadQueue(ModelFolders.of_app(), max_parallel=2, on_change=events.append)
    try:
        jobs = [queue.enqueue(e) for e in entries]
        assert [queue.get(j).state for j in jobs] == [DownloadState.DOWNLOADING] * 2 + [
            DownloadState.QUEUED
        ]
        results = [queue.wait(j, timeout=60) for j in jobs]
    finally:
        queue.close()
    assert [r.state for r in results] == [DownloadState.FINISHED] * 3
    assert all(r.model is not None and r.model.path.exists() for r in results)
    running_at_once = max(
        sum(1 for j in jobs if _state_at(events, j, k) is DownloadState.DOWNLOADING)
        for k in range(len(events))
    )
    assert running_at_once == 2
    assert any(
        e.state is DownloadState.DOWNLOADING and e.speed > 0 and e.eta_seconds is not None
        for e in events
    )


def _state_at(events: list, key: str, k: int) -> DownloadState | None:
    state = None
    for event in events[: k + 1]:
        if event.key == key:
            state = event.state
    return state


def test_a_finished_download_is_described_as_the_library_lists_it(
    hub_env, tiny_gguf, tmp_path
) -> None:
    """The queue hands back the finished model and records its folder: nothing walks the
    folders again to find it, and the next listing agrees."""
    hub_env.add_repo("acme/tiny-GGUF", {"tiny-Q8_0.gguf": tiny_gguf(n_ctx_train=2048)})
    folders = ModelFolders.of_app()
    queue = DownloadQueue(folders)
    try:
        key = queue.enqueue(list_gguf_files("acme/tiny-GGUF").entries[0], tmp_path / "lib")
        done = queue.wait(key, timeout=30)
    finally:
        queue.close()
    assert folders.read().download_folders == ((tmp_path / "lib").resolve(),)
    assert [done.model] == [
        m for m in list_models(include_starter=False) if m.path == done.model.path
    ]
    assert (done.model.repo_id, done.model.context_length) == ("acme/tiny-GGUF", 2048)


def test_downloaded_split_model_loads_in_llama_cpp_from_part_one(
    hub_env, tiny_gguf, tmp_path
) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    from app.models.model_ref import resolve_model
    from tests.hub_fixtures import write_split_gguf

    parts = write_split_gguf(
        tiny_gguf("whole.gguf"), tmp_path / "split" / "tiny-Q8_0.gguf", max_tensors=6
    )
    assert len(parts) == 4
    hub_env.add_repo("acme/split-GGUF", {f"Q8_0/{p.name}": p for p in parts})
    entry = list_gguf_files("acme/split-GGUF").pick("Q8_0")
    assert entry.n_parts == 4 and entry.total_size == sum(p.stat().st_size for p in parts)
    path = resolve_model(str(download_entry(entry)))
    (model,) = list_models(include_starter=False)
    assert (model.path, model.n_parts, model.architecture) == (path, 4, "llama")
    with weights_repacked(False):  # as the engine loads (repacked Q8_0 crashes AMX CPUs)
        llm = llama_cpp.Llama(str(path), n_ctx=64, verbose=False)
    try:
        assert llm.n_vocab() == 283
        assert llm.create_completion("Hello", max_tokens=3)["usage"]["completion_tokens"] >= 1
    finally:
        llm.close()
