"""Fixtures of the Models page tests: the test Hub (tests/hub_server.py, through
HF_ENDPOINT) with three repos of real tiny GGUFs, and a fresh HF cache and data folder.

Real widgets offscreen, a real HTTP server on 127.0.0.1, a temporary HF cache; waits are
on signals and conditions with timeouts, never sleeps.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

pytest.importorskip("pytestqt")

from tests.gguf_factory import write_tiny_gguf
from tests.hub_server import HubServer
from tests.ui.models.page_driver import F16, GATED, OTHER, Q8, REPO, SPLIT


@pytest.fixture(scope="module")
def gguf_files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("ggufs")
    return {
        "q8": write_tiny_gguf(folder / "a.gguf", n_layer=4, seed=1, name="tiny-llama"),
        "f16": write_tiny_gguf(folder / "b.gguf", n_layer=6, seed=2, name="tiny-llama"),
        "gemma": write_tiny_gguf(
            folder / "c.gguf", arch="gemma3", n_layer=6, sliding_window=64, seed=3
        ),
        "split1": write_tiny_gguf(folder / "d.gguf", n_layer=2, seed=4),
        # Every file distinct: the server finds a file by its sha256.
        "gated": write_tiny_gguf(folder / "e.gguf", n_layer=2, seed=5),
    }


@pytest.fixture()
def hub(gguf_files):
    with HubServer() as server:
        server.add_repo(
            REPO,
            {
                Q8: gguf_files["q8"],
                F16: gguf_files["f16"],
                SPLIT[0]: gguf_files["split1"],
                SPLIT[1]: b"second part of a split model " * 1000,
                "README.md": b"# tiny\n",
            },
            downloads=5000,
            likes=7,
            last_modified=datetime(2025, 3, 1, tzinfo=UTC),
        )
        server.add_repo(
            OTHER,
            {"tiny-gemma-Q8_0.gguf": gguf_files["gemma"]},
            downloads=100,
            likes=50,
            last_modified=datetime(2025, 6, 1, tzinfo=UTC),
        )
        server.add_repo(GATED, {"gated-Q8_0.gguf": gguf_files["gated"]}, gated=True, downloads=1)
        yield server


@pytest.fixture()
def env(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setenv("KVSTUDIO_DATA_DIR", str(tmp_path / "data"))
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    from app.models.hub import clear_header_cache

    clear_header_cache()
    return tmp_path
