"""The checks before a load across workers, against real `kvstudio worker`s on 127.0.0.1 and
the starter model: a worker's build report and the K/V pair it lacks, the KV cache each device
gets (predicted vs what llama.cpp allocates), a context that does not fit on one worker, and a
killed worker that takes its rpc-server with it."""

from __future__ import annotations

import os
import select
import signal
import socket
from pathlib import Path

import psutil
import pytest

from app.backends.store import BackendStore
from app.engine.messages import Failed, Load, Loaded
from app.engine.process import EngineProcess
from app.engine.split_devices import read_split_devices
from app.kv.kv_cache import kv_cache_bytes
from app.kv.rpc_fit import split_fit
from app.load.profile import LoadProfile
from app.load.worker_hello import ask_worker
from app.models.gguf_read import read_gguf_header
from app.models.model_ref import resolve_model
from app.platform.units import llama_mib
from tests.backends.rpc_worker_fixtures import (
    Worker,
    f16_only_data,
    free_port_pair,
    greedy_run,
    workers,
)
from tests.cli_runner import assert_bad_input, kvstudio
from tests.engine_events import expect_event

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def f16_only(cpu_package, tmp_path_factory) -> Path:
    """A data folder whose chosen backend has Flash Attention for f16-f16 only."""
    return f16_only_data(cpu_package, tmp_path_factory.mktemp("f16-only"))


def test_a_worker_without_the_pair_is_refused_before_the_load(cpu_chosen, f16_only):
    worker = Worker(f16_only)
    try:
        assert "Flash Attention K/V pairs: f16-f16 (reported on the next port)" in worker.banner
        build = ask_worker(worker.address)
        assert build is not None and build.fa_pairs == ("f16-f16",)
        refused = greedy_run(cpu_chosen, "--kv", "q8_0/f16", "--rpc", worker.address)
        assert_bad_input(refused, f"The worker at {worker.address} (cpu backend) cannot run")
        assert "K=q8_0/V=f16" in refused.stderr and "built for f16-f16 only" in refused.stderr
        allowed = greedy_run(cpu_chosen, "--kv", "f16/f16", "--rpc", worker.address)
        assert allowed.returncode == 0, allowed.stderr
    finally:
        worker.stop()


def test_each_worker_gets_the_kv_cache_the_fit_check_predicts(cpu_chosen):
    model = resolve_model("starter")
    header = read_gguf_header(model)
    proc = EngineProcess(backends=BackendStore(cpu_chosen))
    with workers(cpu_chosen, 2) as (a, b):
        try:
            devices = read_split_devices(cpu_chosen / "backends" / "cpu", (a.address, b.address))
            assert [d.label for d in devices] == [f"RPC0 ({a.address})", f"RPC1 ({b.address})"]
            options = LoadProfile(str(model), n_ctx=1024, rpc_workers=(a.address, b.address))
            proc.send(Load(options))
            loaded = expect_event(proc, (Loaded, Failed))
        finally:
            proc.stop()
    assert isinstance(loaded, Loaded), loaded
    fit = split_fit(header, 1024, "q8_0/f16", list(devices), 1 << 40)
    _cpu, first, second = fit.shares
    assert first.layers and second.has_output and not first.has_output
    # llama.cpp logs one "<buffer> KV buffer size" per cache and device: compare as printed.
    for index, cache in enumerate(loaded.kv_caches):
        logged = dict(zip(cache.devices, cache.device_mib, strict=True))
        assert logged == {
            f"RPC0[{a.address}]": float(llama_mib(first.kv_bytes_per_cache[index])),
            f"RPC0[{b.address}]": float(llama_mib(second.kv_bytes_per_cache[index])),
        }
    # and the shares add up to the whole cache, byte for byte
    assert first.kv_bytes + second.kv_bytes == kv_cache_bytes(header, 1024).total_bytes


def test_a_layer_split_set_by_the_user_puts_the_layers_where_asked(cpu_chosen):
    """--split 1,3: the first worker takes a quarter of the layers, whatever the free memory
    says; the fit check predicts each worker's KV cache for that split, byte for byte, and
    the text is the same as with llama.cpp's own split."""
    model = resolve_model("starter")
    header = read_gguf_header(model)
    proc = EngineProcess(backends=BackendStore(cpu_chosen))
    with workers(cpu_chosen, 2) as (a, b):
        pair = f"{a.address},{b.address}"
        by_user = greedy_run(cpu_chosen, "--rpc", pair, "--split", "1,3")
        by_memory = greedy_run(cpu_chosen, "--rpc", pair)
        three = greedy_run(cpu_chosen, "--rpc", pair, "--split", "1,1,2")
        try:
            devices = read_split_devices(cpu_chosen / "backends" / "cpu", (a.address, b.address))
            options = LoadProfile(
                str(model), n_ctx=1024, rpc_workers=(a.address, b.address), layer_split=(1, 3)
            )
            proc.send(Load(options))
            loaded = expect_event(proc, (Loaded, Failed))
        finally:
            proc.stop()
    assert by_user.returncode == 0, by_user.stderr
    assert by_user.stdout.strip() and by_user.stdout == by_memory.stdout
    assert_bad_input(
        three,
        "The layer split gives 3 shares but the load has 2 devices, in this order: "
        f"RPC0 ({a.address}), RPC1 ({b.address}).",
    )
    assert isinstance(loaded, Loaded), loaded
    fit = split_fit(header, 1024, "q8_0/f16", list(devices), 1 << 40, layer_split=(1, 3))
    _cpu, first, second = fit.shares
    # A quarter of the starter's 19 (18 layers and the output layer) is 4.75: split points
    # 0.25 and 1.0 give layers 0-4 to the first worker, the rest and the output to the second.
    assert first.layers == (0, 1, 2, 3, 4) and not first.has_output
    assert len(second.layers) == 13 and second.has_output
    by_free = split_fit(header, 1024, "q8_0/f16", list(devices), 1 << 40).shares[1]
    assert len(by_free.layers) != len(first.layers)  # not what free memory alone would give
    # The first worker holds no global-attention layer (5, 11, 17): llama.cpp allocates, and
    # logs, no buffer of that cache there, as predicted.
    assert first.kv_bytes_per_cache[0] == 0 < second.kv_bytes_per_cache[0]
    for index, cache in enumerate(loaded.kv_caches):
        logged = dict(zip(cache.devices, cache.device_mib, strict=True))
        predicted = {
            f"RPC0[{a.address}]": first.kv_bytes_per_cache[index],
            f"RPC0[{b.address}]": second.kv_bytes_per_cache[index],
        }
        assert logged == {name: float(llama_mib(n)) for name, n in predicted.items() if n}


def test_a_context_that_does_not_fit_on_one_worker_names_it(cpu_chosen):
    # 300 MiB on every device: the first worker's layers fit, the second's (with the output
    # layer: tied embeddings and a 512 MiB logits buffer) do not.
    with workers(cpu_chosen, 2) as (a, b):
        result = greedy_run(
            cpu_chosen, "--rpc", f"{a.address},{b.address}", env={"KVSTUDIO_FREE_MEMORY": "300MiB"}
        )
    assert_bad_input(result, f"RPC1 ({b.address}) needs")
    assert "has 300.00 MiB free" in result.stderr and "--force" in result.stderr


def test_a_killed_worker_takes_its_rpc_server_with_it(cpu_chosen):
    worker = Worker(cpu_chosen)
    (server,) = psutil.Process(worker.process.pid).children()
    assert server.name().startswith("ggml-rpc-server")
    # A pidfd turns readable when the process ends: a wait on the event, not a poll.
    pidfd = os.pidfd_open(server.pid)
    try:
        worker.process.send_signal(signal.SIGKILL)
        worker.process.wait(timeout=30)
        readable, _, _ = select.select([pidfd], [], [], 30)
        assert readable, "rpc-server outlived its killed worker for 30 s"
    finally:
        os.close(pidfd)
        if server.is_running() and server.status() != psutil.STATUS_ZOMBIE:
            server.kill()


def test_a_worker_whose_report_port_is_taken_says_so(cpu_chosen):
    port = free_port_pair()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port + 1))
        taken.listen()
        result = kvstudio("worker", "--port", str(port), env={"KVSTUDIO_DATA_DIR": str(cpu_chosen)})
    assert_bad_input(result, f"The worker's build report needs port {port + 1} on 127.0.0.1")
    assert "choose another --port" in result.stderr
