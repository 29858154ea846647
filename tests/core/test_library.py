"""The library: models found on disk (HF cache, download folders, user folders, starter)."""

from __future__ import annotations

import json

import pytest

from app.models.hub import download_entry, list_gguf_files
from app.models.library import find_model, list_models
from app.models.library_delete import delete_model
from app.models.model_folders import ModelFolders
from app.platform.errors import BadInputError, ModelNotFoundError


@pytest.fixture
def two_repos(hub_env, tiny_gguf):
    hub_env.add_repo(
        "acme/tiny-GGUF",
        {
            "tiny-Q8_0.gguf": tiny_gguf("a.gguf", n_ctx_train=2048),
            "tiny-Q4_K_M.gguf": tiny_gguf("b.gguf", seed=3, n_layer=3),
        },
    )
    hub_env.add_repo(
        "other/tiny-GGUF", {"tiny-Q8_0.gguf": tiny_gguf("c.gguf", seed=5, arch="gemma3")}
    )
    for repo, quant in (
        ("acme/tiny-GGUF", "Q8_0"),
        ("acme/tiny-GGUF", "Q4_K_M"),
        ("other/tiny-GGUF", "Q8_0"),
    ):
        download_entry(list_gguf_files(repo).pick(quant))
    return hub_env


def test_lists_hf_cache_models_with_header_fields(two_repos) -> None:
    models = list_models(include_starter=False)
    assert [(m.repo_id, m.name) for m in models] == [
        ("acme/tiny-GGUF", "tiny-Q4_K_M"),
        ("acme/tiny-GGUF", "tiny-Q8_0"),
        ("other/tiny-GGUF", "tiny-Q8_0"),
    ]
    q8 = models[1]
    assert (q8.architecture, q8.context_length, q8.quantization, q8.source) == (
        "llama",
        2048,
        "Q8_0",
        "hf-cache",
    )
    assert q8.parameter_count and q8.parameter_count > 0
    assert q8.file_size == q8.path.stat().st_size
    assert models[2].architecture == "gemma3"


def test_user_folders_and_unreadable_files(hub_env, tiny_gguf, tmp_path) -> None:
    own = tmp_path / "own"
    own.mkdir()
    tiny_gguf("mine-Q8_0.gguf").rename(own / "mine-Q8_0.gguf")
    (own / "broken.gguf").write_bytes(b"not a gguf at all")
    (own / "half.gguf.incomplete").write_bytes(b"GGUF")
    models = {m.name: m for m in list_models(extra_dirs=[own], include_starter=False)}
    assert sorted(models) == ["broken", "mine-Q8_0"]
    assert models["mine-Q8_0"].repo_id is None and models["mine-Q8_0"].error is None
    assert "not a GGUF" in (models["broken"].error or "")


def test_starter_model_is_listed_when_installed(hub_env) -> None:
    from app.models import starter

    if not starter.is_installed():
        pytest.skip("the starter package is not installed")
    (model,) = [m for m in list_models() if m.source == "starter"]
    assert (model.name, model.architecture, model.quantization, model.ref) == (
        "starter",
        "gemma3",
        "Q4_K_M",
        "starter",
    )
    assert model.file_size == 253_113_024


def test_find_by_name_repo_quant_and_path(two_repos) -> None:
    models = list_models(include_starter=False)
    assert find_model("tiny-Q4_K_M", models).quantization == "Q4_K_M"
    assert find_model("acme/tiny-GGUF:Q8_0", models).repo_id == "acme/tiny-GGUF"
    assert find_model("other/tiny-GGUF", models).repo_id == "other/tiny-GGUF"
    path = models[0].path
    assert find_model(str(path), models).path == path
    with pytest.raises(BadInputError, match="matches 2 models"):
        find_model("tiny-Q8_0", models)
    with pytest.raises(BadInputError, match="matches 2 models"):
        find_model("acme/tiny-GGUF", models)
    with pytest.raises(ModelNotFoundError, match="No model named 'nothing'"):
        find_model("nothing", models)


def test_delete_removes_blob_and_links_and_keeps_the_rest(two_repos, tmp_path) -> None:
    storage = tmp_path / "hf-cache" / "models--acme--tiny-GGUF"
    q8 = find_model("acme/tiny-GGUF:Q8_0")
    blob = q8.path.resolve()
    delete_model(q8)
    assert not blob.exists() and not q8.path.exists()
    assert [
        m.name for m in list_models(include_starter=False) if m.repo_id == "acme/tiny-GGUF"
    ] == ["tiny-Q4_K_M"]
    delete_model(find_model("acme/tiny-GGUF:Q4_K_M"))
    assert not storage.exists()  # nothing left of the repo: its folder goes too
    assert [m.repo_id for m in list_models(include_starter=False)] == ["other/tiny-GGUF"]


def test_delete_from_a_download_folder(hub_env, tiny_gguf, tmp_path) -> None:
    hub_env.add_repo("acme/tiny-GGUF", {"tiny-Q8_0.gguf": tiny_gguf()})
    path = download_entry(list_gguf_files("acme/tiny-GGUF").entries[0], folder=tmp_path / "lib")
    ModelFolders.of_app().add_download_folder(tmp_path / "lib")  # what the downloader's caller does
    saved = json.loads((tmp_path / "kvstudio-data" / "model_folders.json").read_text())
    assert saved["download_folders"] == [str((tmp_path / "lib").resolve())]
    assert find_model("tiny-Q8_0").repo_id == "acme/tiny-GGUF"
    delete_model(find_model("tiny-Q8_0"))
    assert not path.exists()
    assert list_models(include_starter=False) == []


def test_starter_cannot_be_deleted(hub_env) -> None:
    from app.models import starter

    if not starter.is_installed():
        pytest.skip("the starter package is not installed")
    with pytest.raises(BadInputError, match="starter"):
        delete_model(find_model("starter"))


def test_resolve_model_takes_library_names_and_pulls_hub_models(
    hub_env, tiny_gguf, tmp_path
) -> None:
    from app.models.model_ref import resolve_model
    from app.platform.errors import ModelFileMissingError

    hub_env.add_repo("acme/tiny-GGUF", {"tiny-Q8_0.gguf": tiny_gguf()})
    pulled = resolve_model("acme/tiny-GGUF:Q8_0")  # not on disk yet: downloaded
    assert pulled.is_file() and pulled.is_relative_to(tmp_path / "hf-cache")
    sent = hub_env.bytes_sent()
    assert resolve_model("tiny-Q8_0") == pulled  # a library name
    assert resolve_model("acme/tiny-GGUF:Q8_0") == pulled  # now from the library, no download
    assert hub_env.bytes_sent() == sent
    with pytest.raises(ModelFileMissingError):
        resolve_model(str(tmp_path / "missing.gguf"))
    with pytest.raises(ModelFileMissingError):
        resolve_model("acme/other-GGUF:Q8_0", allow_pull=False)


def test_resolve_model_keeps_the_snapshot_path_of_a_split_model(hub_env, tiny_gguf) -> None:
    from app.models.model_ref import resolve_model

    hub_env.add_repo(
        "acme/big-GGUF",
        {
            "big-Q8_0-00001-of-00002.gguf": tiny_gguf("p1.gguf").read_bytes(),
            "big-Q8_0-00002-of-00002.gguf": b"second part",
        },
    )
    path = resolve_model("acme/big-GGUF:Q8_0")
    assert path.name == "big-Q8_0-00001-of-00002.gguf"  # not blobs/<sha256>
    assert path.with_name("big-Q8_0-00002-of-00002.gguf").read_bytes() == b"second part"


def test_model_folders_of_older_releases_are_kept(hub_env, tiny_gguf, tmp_path) -> None:
    """The user's folders (GUI), the download folders and the download destination were three
    files; the one list reads them until it is first written."""
    data = tmp_path / "kvstudio-data"
    data.mkdir(exist_ok=True)
    own, downloaded = tmp_path / "own", tmp_path / "lib"
    (downloaded / "acme" / "tiny-GGUF").mkdir(parents=True)
    own.mkdir()
    tiny_gguf("mine-Q8_0.gguf").rename(own / "mine-Q8_0.gguf")
    tiny_gguf("t.gguf", seed=2).rename(downloaded / "acme" / "tiny-GGUF" / "tiny-Q8_0.gguf")
    (data / "model_folders.json").write_text(json.dumps([str(own)]))
    (data / "library_folders.json").write_text(json.dumps([str(downloaded)]))
    (data / "download_folder.json").write_text(json.dumps({"folder": str(downloaded)}))
    folders = ModelFolders(data)
    assert folders.read().download_to == downloaded
    repos = {m.name: m.repo_id for m in list_models(folders=folders, include_starter=False)}
    assert repos == {"mine-Q8_0": None, "tiny-Q8_0": "acme/tiny-GGUF"}
    folders.add_folder(tmp_path / "more")
    assert folders.read().folders == (own, (tmp_path / "more").resolve())
    assert folders.read().download_folders == (downloaded,)
