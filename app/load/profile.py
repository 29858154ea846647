"""The one description of a model load: what to load and every setting it loads with.

A LoadProfile is decided once (by the load dialog, the defaults in the settings, a model's
remembered choice, or the CLI's arguments) and then travels one way, unchanged: the load
dialog's signal -> the chat page -> the engine client -> the engine's Load message -> the
worker -> the loader, which hands its numbers to llama.cpp. The K/V mode is a KvMode, never a
string; the engine answers with the profile it loaded (Loaded.options).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.kv.kv_types import DEFAULT_KV_MODE, KvMode


@dataclass(frozen=True)
class LoadProfile:
    model_path: str
    n_ctx: int = 4096
    kv: KvMode = DEFAULT_KV_MODE
    n_gpu_layers: int = -1  # -1: every layer on the GPU when the build has one
    n_threads: int | None = None  # None: llama.cpp's default
    # llama.cpp RPC workers ("host:port", checked by app.load.rpc_workers): the model is split
    # across their devices (and this machine's GPUs) by llama.cpp. Only ever typed by the user
    # (or started by the load dialog), never read from a model or a downloaded file.
    rpc_workers: tuple[str, ...] = ()
    # Each device's share of the layers, in llama.cpp's device order (the workers' devices, then
    # this machine's GPUs): llama.cpp's tensor_split. Empty: split by each device's free memory.
    layer_split: tuple[float, ...] = ()
    flash_attn: bool = True
    seed: int = -1
    n_batch: int = 512
    n_ubatch: int = 512
    swa_full: bool = False  # sliding-window cache at full n_ctx (llama.cpp --swa-full)
    chat_format: str | None = None  # None: from the GGUF, or chosen by architecture
    # llama.cpp's repacked CPU weights (its "extra buffer types", CPU_REPACK): faster CPU matrix
    # products, but summed in another order than an RPC worker's CPU device, so greedy text
    # differs by where the layers run. Off by default: the same text in-process and split.
    repack_weights: bool = False
