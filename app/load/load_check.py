"""Refuse a model load that cannot work, before an engine is started (CLI and GUI alike).

Three checks, in order:
1. the context fits llama.cpp at all: n_ctx is a uint32 that llama.cpp pads up to a multiple
   of 256, so anything above MAX_N_CTX wraps around (never forceable);
2. the context is within the model's trained context (forceable);
3. the load fits the memory the device reports free: weights + KV cache + compute and output
   buffers (app.kv.fit.memory_need, the same need the Models page's verdicts use), refused
   when it is over the free memory, i.e. the verdict 'does not fit' (forceable).

    check_context_size(args.ctx, "--ctx")                # before anything is read
    check_model_load(path, options, force=args.force)    # raises ContextTooLargeError
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from app.backends.store import BackendStore, library_folder
from app.kv.fit import ShapeOptions, fit_context_length, memory_need
from app.kv.rpc_fit import largest_split_context, split_fit
from app.load.profile import LoadProfile
from app.models.gguf_header import GgufHeader
from app.models.gguf_read import read_gguf_header
from app.models.model_files import model_size
from app.platform.errors import BadInputError, ContextTooLargeError, NotEnoughMemoryError
from app.platform.paths import data_dir
from app.platform.probes import FREE_MEMORY_ENV, FreeMemory, read_free_memory
from app.platform.units import size

if TYPE_CHECKING:
    from app.kv.rpc_fit import SplitFit
    from app.kv.split_device import SplitDevice

# llama.cpp keeps n_ctx in a uint32 and pads it to a multiple of 256 (llama-context.cpp):
# above 2**32 - 256 the padding wraps to 0 and the context cannot be created.
MAX_N_CTX = 2**32 - 256
CLI_ADVICE = "lower --ctx, or pass --force to load anyway"
_GPU_BACKENDS = ("cuda", "hip", "rocm", "vulkan", "metal", "sycl", "musa", "opencl")


def _sizes(*n_bytes: int) -> list[str]:
    """Sizes with one decimal in the unit that suits each (MiB below 1 GiB: "0.0 GiB free"
    says nothing), or more decimals where the need and the free memory (the last two) would
    otherwise print alike ("needs 0.8 GiB ... 0.8 GiB free")."""
    for digits in (1, 2, 3):
        shown = [size(n, digits) for n in n_bytes]
        if shown[-1] != shown[-2]:
            break
    return shown


def check_context_size(n_ctx: int, label: str = "The context") -> None:
    """Raise ContextTooLargeError (or BadInputError below 1) when llama.cpp cannot hold
    `n_ctx` tokens whatever the model; `label` names it in the sentence ("--ctx")."""
    if n_ctx < 1:
        raise BadInputError(f"{label} must be a positive number of tokens, not {n_ctx}.")
    if n_ctx > MAX_N_CTX:
        raise ContextTooLargeError(
            f"{label} {n_ctx:,} is more tokens than llama.cpp can hold ({MAX_N_CTX:,} at most).",
            n_ctx=n_ctx,
            forceable=False,
        )


def check_trained_context(header: GgufHeader, n_ctx: int, advice: str = CLI_ADVICE) -> None:
    """Refuse (forceably) a context beyond the model's trained context; unknown: allowed."""
    trained = header.context_length
    if trained and n_ctx > trained:
        raise ContextTooLargeError(
            f"A context of {n_ctx:,} tokens is beyond this model's trained context of "
            f"{trained:,} tokens (replies degrade past it); {advice}.",
            n_ctx=n_ctx,
            forceable=True,
        )


def check_load_fits(
    header: GgufHeader,
    options: LoadProfile,
    free: FreeMemory,
    *,
    file_size: int | None = None,
    force: bool = False,
    advice: str = CLI_ADVICE,
) -> None:
    """Raise ContextTooLargeError (NotEnoughMemoryError for memory) with one sentence and
    the numbers when loading `header`'s model with `options` cannot work in `free`.
    `force` skips what a user may override; `file_size`: all the model's bytes (split
    models); `advice`: what the user can do, ending the sentence."""
    n_ctx = options.n_ctx
    check_context_size(n_ctx)
    if force:
        return
    check_trained_context(header, n_ctx, advice)
    mode = options.kv
    shape: ShapeOptions = {
        "file_size": file_size,
        "n_ubatch": options.n_ubatch,
        "swa_full": options.swa_full,
        "flash_attn": options.flash_attn,
        "on_gpu": free.on_gpu,
    }
    need = memory_need(header, n_ctx, mode, **shape)
    if need.total_bytes <= free.bytes:
        return
    largest = fit_context_length(header, free.bytes, mode, max_ctx=n_ctx, **shape)
    room = f"{largest:,} tokens would fit" if largest else "not even 256 tokens would fit"
    kv, total, available = _sizes(need.kv_bytes, need.total_bytes, free.bytes)
    raise NotEnoughMemoryError(
        f"The model needs {kv} for the KV cache at {n_ctx:,} tokens ({total} with weights and "
        f"buffers), but {free.device} has {available} free ({room}); {advice}.",
        n_ctx=n_ctx,
        need_bytes=need.total_bytes,
        kv_bytes=need.kv_bytes,
        free_bytes=free.bytes,
        largest_n_ctx=largest,
    )


def check_split_fits(
    header: GgufHeader,
    options: LoadProfile,
    devices: list[SplitDevice],
    host: FreeMemory,
    *,
    file_size: int | None = None,
    force: bool = False,
    advice: str = CLI_ADVICE,
) -> SplitFit:
    """check_load_fits for a load split across `devices` (RPC workers' and local GPUs', in
    llama.cpp's order; budgets already capped by $KVSTUDIO_FREE_MEMORY) with the CPU's share
    in `host`: NotEnoughMemoryError naming the device that runs out first. Returns the fit."""

    n_ctx = options.n_ctx
    check_context_size(n_ctx)
    if not force:
        check_trained_context(header, n_ctx, advice)

    def fit_at(tokens: int) -> SplitFit:
        return split_fit(
            header,
            tokens,
            options.kv,
            devices,
            host.bytes,
            n_gpu_layers=options.n_gpu_layers,
            n_ubatch=options.n_ubatch,
            swa_full=options.swa_full,
            flash_attn=options.flash_attn,
            file_size=file_size,
            layer_split=options.layer_split,
        )

    fit = fit_at(n_ctx)
    if force or fit.fits:
        return fit
    largest = largest_split_context(lambda tokens: fit_at(tokens).fits, n_ctx)
    room = f"{largest:,} tokens would fit" if largest else "not even 256 tokens would fit"
    short = fit.runs_out_first()
    raise NotEnoughMemoryError(
        f"{fit.sentence()} ({room}); {advice}.",
        n_ctx=n_ctx,
        need_bytes=short.need_bytes,
        kv_bytes=short.kv_bytes,
        free_bytes=short.budget_bytes,
        largest_n_ctx=largest,
    )


def check_model_load(
    path: Path, *options: LoadProfile, force: bool = False, advice: str = CLI_ADVICE
) -> None:
    """check_load_fits for the model file at `path` with each of `options` (one per load),
    against the memory it would load into now (reads the header and the memory probes:
    call it off the GUI thread)."""

    header = read_gguf_header(path)
    size = model_size(path)
    free: dict[int, FreeMemory] = {}  # read once per GPU-layer setting
    for option in options:
        layers = option.n_gpu_layers
        if layers not in free:
            free[layers] = free_memory_for(layers, header.block_count)
        check_load_fits(header, option, free[layers], file_size=size, force=force, advice=advice)


def free_memory_for(n_gpu_layers: int, n_layers: int) -> FreeMemory:
    """The memory a load with `n_gpu_layers` goes into: system RAM for n_gpu_layers=0 or a
    CPU-only llama.cpp, the GPU's free memory when every layer is offloaded, and both
    together when only some are (the weights and KV cache are split between them)."""

    if n_gpu_layers == 0 or not gpu_build():
        return read_free_memory(gpu=False)
    gpu = read_free_memory(gpu=True)
    partial = gpu.on_gpu and 0 < n_gpu_layers <= n_layers  # llama.cpp counts the output layer too
    if not partial or gpu.source == FREE_MEMORY_ENV:
        return gpu
    ram = read_free_memory(gpu=False)
    return FreeMemory(gpu.bytes + ram.bytes, f"{gpu.device} and system RAM", gpu.source, True)


def gpu_build() -> bool:
    """Whether the llama.cpp the engine runs (the chosen backend package, else the installed
    llama-cpp-python's) has a GPU backend, from its library files (importing llama_cpp here
    would load it into the GUI process). True when it cannot tell."""

    backend, _ = BackendStore(data_dir()).for_engine()
    folder = library_folder(backend)
    libs = [p.name.lower() for p in folder.iterdir()] if folder and folder.is_dir() else []
    if not libs:
        return True
    return any(f"ggml-{backend}" in name for name in libs for backend in _GPU_BACKENDS)
