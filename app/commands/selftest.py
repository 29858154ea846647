"""`kvstudio selftest`: does this install run a model with the int8-K cache? No display needed.

Writes a tiny random-weight Llama GGUF (a few MB) to a temporary folder, loads it in the engine on
the chosen backend with Flash Attention and K=q8_0/V=f16, generates a few tokens, reads the
engine's memory through the app's probes, and prints one line. Exit 0 when all of it worked; 1 with
one sentence when something did not (a load failure, a kernel warning such as a K/V pair converted
to f16, no tokens). An installer runs it after installing; so can a user.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from app.engine.messages import Generate, Load, SamplingSettings
from app.engine.process import EngineProcess, until
from app.kv.kv_types import DEFAULT_KV_MODE
from app.load.profile import LoadProfile
from app.models.random_model import write_model
from app.platform.errors import AppError, EngineFailedError
from app.platform.probes import detect_probe
from app.platform.units import size, size_number

TOKENS = 8
LOAD_TIMEOUT_S = 300.0
REPLY_TIMEOUT_S = 300.0
FAILED_EXIT = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gpu-layers", type=int, default=-1, help="layers on the GPU (-1: all)")


def run(args: argparse.Namespace) -> int:
    try:
        print(selftest(args.gpu_layers))
    except AppError as error:
        print(f"kvstudio selftest: {error}", file=sys.stderr)
        return FAILED_EXIT
    return 0


def selftest(gpu_layers: int = -1) -> str:
    """The one line to print; EngineFailedError (an AppError) when the install cannot run it."""

    with tempfile.TemporaryDirectory(prefix="kvstudio-selftest-") as folder:
        model = write_model(Path(folder) / "selftest-tiny-llama.gguf", 2, "small", None)
        options = LoadProfile(
            model_path=str(model), n_ctx=512, n_gpu_layers=gpu_layers, kv=DEFAULT_KV_MODE
        )
        proc = EngineProcess()
        try:
            proc.send(Load(options))
            loaded = until(proc, "Loaded", LOAD_TIMEOUT_S)
            if loaded.warnings:
                raise EngineFailedError(
                    "llama.cpp did not run the int8-K cache as asked: "
                    + "; ".join(w.text for w in loaded.warnings)
                    + "."
                )
            sampling = SamplingSettings(temperature=0.0, max_tokens=TOKENS, seed=1)
            proc.send(Generate("selftest", sampling, prompt="Hello"))
            finished = until(proc, "Finished", REPLY_TIMEOUT_S)
            on_gpu = any(not d.startswith("CPU") for c in loaded.kv_caches for d in c.devices)
            probe = detect_probe(gpu=on_gpu)
            try:
                sample = probe.sample(proc.pid)
            finally:
                probe.close()
            backend = proc.backend
        finally:
            proc.stop()
    if finished.generated_tokens <= 0:
        raise EngineFailedError("The engine loaded the test model but generated no tokens.")
    devices = sorted({d for c in loaded.kv_caches for d in c.devices}) or ["unknown"]
    kv_bytes = sum(c.total_mib for c in loaded.kv_caches) * 2**20  # llama.cpp's MiB figures
    used = sample.process_used if sample.process_used is not None else sample.device_used
    whose = "engine process" if sample.process_used is not None else probe.device
    return (
        f"selftest passed: {backend} backend, KV cache K=q8_0/V=f16 with Flash Attention on "
        f"{', '.join(devices)} ({size_number(kv_bytes, 'MiB', 2)} MiB), "
        f"{finished.generated_tokens} tokens at "
        f"{finished.tokens_per_second:.1f} t/s, {whose} memory {size(used)} ({probe.name})"
    )
