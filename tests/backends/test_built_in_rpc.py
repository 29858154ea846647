"""The built-in backend (llama-cpp-python's own build) without RPC: an install whose
llama-cpp-python was built without GGML_RPC, or has no rpc-server beside it, gets one sentence
saying how to get them, from the CLI, the load check, the engine and `python -m kernels`.

Such a build cannot be made beside the real one here (another 10-minute compile), so the
built-in backend's folder is pointed at a copy of the real one with the RPC files left out:
links to the same libraries, as a pip build without GGML_RPC lays them out."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.backends import store as backends
from app.backends.built_in import built_in_folder
from app.backends.manifest import handles_pair
from app.commands import worker
from app.engine import rpc_devices
from app.engine.rpc_load_check import backend_with_rpc
from app.kv.kv_types import KvMode
from app.platform.errors import BadInputError, EngineFailedError
from kernels import rpc_server
from kernels.__main__ import main as kernels_main

RPC_FILES = {"libggml-rpc.so", rpc_server.PROGRAM}


def _copy_without(tmp_path: Path, left_out: set[str]) -> Path:
    real = built_in_folder()
    assert real is not None and (real / "libggml-rpc.so").is_file(), "quickstart builds RPC in"
    copy = tmp_path / "lib"
    copy.mkdir()
    for file in real.iterdir():
        if file.name not in left_out:
            (copy / file.name).symlink_to(file)
    return copy


@pytest.fixture
def built_without_rpc(tmp_path, monkeypatch) -> Path:
    copy = _copy_without(tmp_path, RPC_FILES)
    monkeypatch.setattr(backends, "built_in_folder", lambda: copy)
    monkeypatch.setattr(rpc_server, "built_in_folder", lambda: copy)
    monkeypatch.setenv("KVSTUDIO_DATA_DIR", str(tmp_path / "data"))
    return copy


def test_a_load_across_workers_says_how_to_rebuild(built_without_rpc, tmp_path):
    with pytest.raises(BadInputError) as refused:
        backend_with_rpc(tmp_path / "data")
    assert str(refused.value) == (
        "The built-in backend was built without RPC support: run ./quickstart.sh again, which "
        "builds llama-cpp-python with GGML_RPC, or choose a backend package (kvstudio backend "
        "use cpu, or your GPU's) to load across workers."
    )


def test_the_engine_refuses_workers_on_a_build_without_rpc(built_without_rpc, monkeypatch):
    # The engine process finds its libraries through LLAMA_CPP_LIB_PATH, as for a package.
    monkeypatch.setenv("LLAMA_CPP_LIB_PATH", str(built_without_rpc))
    with pytest.raises(EngineFailedError, match="^This backend was built without RPC support"):
        rpc_devices.add_workers(("127.0.0.1:50052",))
    assert rpc_devices._added == []


def test_a_worker_without_rpc_server_says_how_to_build_it(built_without_rpc):
    with pytest.raises(BadInputError) as refused:
        worker._server_program()
    assert str(refused.value) == (
        "The built-in backend has no ggml-rpc-server: build it with `python -m kernels "
        "rpc-server` (./quickstart.sh does), or choose a backend package (kvstudio backend add "
        "kvstudio-backend-cpu-*.tar.gz --use) to run a worker."
    )


def test_rpc_server_is_not_built_against_a_build_without_rpc(built_without_rpc, capsys):
    assert kernels_main(["rpc-server"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "kernels: This llama-cpp-python was built without GGML_RPC: reinstall it with "
        'CMAKE_ARGS="-DGGML_RPC=ON" (./quickstart.sh does) first.\n'
    )
    assert not (built_without_rpc / rpc_server.PROGRAM).exists()


def test_the_built_in_worker_runs_the_rpc_server_beside_its_libraries(tmp_path, monkeypatch):
    monkeypatch.setenv("KVSTUDIO_DATA_DIR", str(tmp_path))
    name, program, pairs = worker._server_program()
    assert name == "built-in" and program == backends.built_in_folder() / rpc_server.PROGRAM
    assert program.is_file()
    # What the worker reports: a CPU build runs every K/V pair natively, int8-K included.
    assert handles_pair(pairs, KvMode.parse("q8_0/f16"))
