"""Load a model into a llama_cpp.Llama inside the engine process and describe what
llama.cpp made of it (KV caches, compute buffers, warnings) from its log.

Runs only in the engine process, after llama_cpp has been imported (see worker.main).
"""

from __future__ import annotations

import ctypes
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import llama_cpp

from app.backends.built_in import built_in_folder
from app.backends.manifest import kernel_of_folder
from app.engine import devices, rpc_devices
from app.engine.chat_template import ChatTemplate, choose_template
from app.engine.cpu_threads import threads_for
from app.engine.llama_log import LlamaLogRouter
from app.engine.llama_switches import switches_set
from app.engine.loaded_libraries import GPU_LIBRARY, loaded_folder
from app.engine.log_parse import parse_log
from app.engine.messages import Loaded
from app.engine.template_sandbox import RenderLimits
from app.kv.split_device import SplitDevice
from app.load.profile import LoadProfile
from app.models.checked_models import check_model_file
from app.models.model_kind import base_model_reason
from app.platform.errors import AppError, BadInputError, EngineFailedError
from app.platform.memory_ceiling import ceiling_is_the_limit, ceiling_sentence, engine_ceiling

log = logging.getLogger(__name__)


@dataclass
class LoadedModel:
    llm: llama_cpp.Llama
    loaded: Loaded
    template: ChatTemplate


def load_model(options: LoadProfile, router: LlamaLogRouter) -> LoadedModel:
    """Create the Llama for `options`. Raises AppError with one sentence on failure."""
    try:
        return _load_model(options, router)
    except MemoryError:  # Python's own allocations ran into the ceiling (reading the header)
        raise EngineFailedError(_out_of_memory()) from None


def _load_model(options: LoadProfile, router: LlamaLogRouter) -> LoadedModel:
    path = Path(options.model_path)
    # Missing, not a GGUF, truncated, hostile: a sentence, before llama.cpp sees it. The long
    # token list is checked here, not on every header read (gguf_tokenizer); neither again for
    # an unchanged file that passed before (checked_models).
    check_model_file(path)
    if options.n_ctx <= 0:
        raise EngineFailedError(f"The context size must be positive, not {options.n_ctx}.")
    if options.repack_weights and devices.has_amx():
        raise BadInputError(AMX_REPACK_REFUSAL)
    rpc_devices.add_workers(options.rpc_workers)
    router.flush()
    router.take_lines()  # only this load's lines are parsed below
    started = time.perf_counter()
    try:
        with _templates_left_to_us(), weights_repacked(options.repack_weights):
            llm = _new_llama(path, options)
    except AppError:
        raise
    except Exception as error:  # llama-cpp-python raises ValueError/RuntimeError
        router.flush()
        lines = router.take_lines()
        reason = _failure_reason(lines)
        log.warning("load of %s failed: %s (%s)", path, error, reason)
        # numpy's MemoryError: llama-cpp-python's logits array, after llama.cpp's buffers.
        out_of_memory = isinstance(error, MemoryError) or any(
            sign in line for line in lines for sign in _HOST_ALLOCATION_FAILED
        )
        ceiling = engine_ceiling()
        if out_of_memory and (ceiling is None or ceiling_is_the_limit(ceiling)):
            raise EngineFailedError(_out_of_memory()) from error
        raise EngineFailedError(
            f"llama.cpp could not load {path.name}" + (f": {reason}." if reason else ".")
        ) from error
    seconds = time.perf_counter() - started
    router.flush()
    loaded, template = _describe(llm, options, seconds, router.take_lines())
    log.info("loaded %s in %.2f s (pid %d)", path.name, seconds, os.getpid())
    return LoadedModel(llm, loaded, template)


def _new_llama(path: Path, options: LoadProfile) -> llama_cpp.Llama:
    """llama_cpp.Llama for `options` (loads the weights; raises what llama-cpp-python raises)."""
    threads = threads_for(options.n_threads)
    return llama_cpp.Llama(
        model_path=str(path),
        n_ctx=options.n_ctx,
        n_gpu_layers=options.n_gpu_layers,
        flash_attn=options.flash_attn,
        type_k=options.kv.k.ggml_id,
        type_v=options.kv.v.ggml_id,
        n_batch=options.n_batch,
        n_ubatch=options.n_ubatch,
        swa_full=options.swa_full,
        seed=options.seed if options.seed >= 0 else llama_cpp.LLAMA_DEFAULT_SEED,
        logits_all=False,
        # verbose=False would point fd 2 at /dev/null while loading, hiding an abort's
        # message from the crash report; the log itself goes through our callback anyway.
        verbose=True,
        tensor_split=list(options.layer_split) if options.layer_split else None,
        # None: llama-cpp-python's defaults (half the cores to generate, all to batch).
        n_threads=threads,
        n_threads_batch=threads,
    )


def _describe(
    llm: llama_cpp.Llama, options: LoadProfile, seconds: float, lines: list[str]
) -> tuple[Loaded, ChatTemplate]:
    """What the load made (from llama.cpp's log `lines`), and the chat template chosen."""
    path = Path(options.model_path)
    expect_gpu = devices.supports_gpu_offload() and options.n_gpu_layers != 0
    parsed = parse_log(lines, expect_gpu=expect_gpu)
    metadata = dict(llm.metadata or {})
    architecture = metadata.get("general.architecture", "")
    gguf_template = _chat_template(llm)
    template = choose_template(
        gguf_template,
        architecture,
        has_special_token=lambda text: _is_one_token(llm, text),
        override=options.chat_format,
    )
    loaded = Loaded(
        model_path=str(path),
        options=options,
        load_seconds=seconds,
        n_ctx=llm.n_ctx(),
        n_ctx_train=llm._model.n_ctx_train(),
        architecture=architecture,
        chat_format=template.source,
        chat_template_notice=template.notice,
        base_model=base_model_reason(
            metadata, bool(gguf_template and gguf_template.strip()), path.name
        ),
        kv_caches=tuple(parsed.kv_caches),
        compute_buffers=tuple(parsed.compute_buffers),
        warnings=tuple(parsed.warnings),
        system_info=llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip(),
        at=time.monotonic(),
        # Read once the weights and caches are placed, so "free" is what the load left.
        device_memory=_device_memory() if options.rpc_workers else (),
        fa_kernel=_fa_kernel(),
        switches=switches_set(os.environ),
    )
    return loaded, template


def check_loadable(options: LoadProfile, router: LlamaLogRouter) -> None:
    """What llama.cpp refuses before any weights are read (an unknown architecture, bad
    hyperparameters, a broken vocabulary), found by a vocabulary-only load that holds no
    tensors: run while another model is loaded, so a refused file never costs the user that
    model. Raises AppError with llama.cpp's reason; loading the file can still fail later."""

    path = Path(options.model_path)
    check_model_file(path)  # a repeated token aborts this load too
    router.flush()
    router.take_lines()
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    if model:
        llama_cpp.llama_model_free(model)
        return
    router.flush()
    reason = _failure_reason(router.take_lines())
    raise EngineFailedError(
        f"llama.cpp could not load {path.name}" + (f": {reason}." if reason else ".")
    )


# Repacking lets llama.cpp put Q4_K/Q8_0 weights in its AMX buffer where the CPU has AMX, and
# its AMX matrix kernel crashes there (SIGSEGV in ggml_backend_amx_mul_mat on the starter, seen
# on a Sapphire Rapids Xeon; llama.cpp issue 20824, open). Without repacking no AMX is used.
AMX_REPACK_REFUSAL = (
    "Repacked weights are not offered on this CPU: with them llama.cpp uses its AMX kernels, "
    "which crash on this model (llama.cpp issue 20824); load without --repack."
)


@contextmanager
def weights_repacked(repack: bool) -> Iterator[None]:
    """While inside, the model params llama_cpp.Llama starts from have `use_extra_bufts` set to
    `repack` (llama.cpp's --no-repack when False). llama-cpp-python 0.3.36 has the field in its
    struct but no Llama argument for it, and Llama.__init__ reads the defaults from the
    llama_cpp.llama_cpp module, so that is what is wrapped."""
    bindings = llama_cpp.llama_cpp
    defaults = bindings.llama_model_default_params

    def with_repack() -> llama_cpp.llama_model_params:
        # llama_cpp's ctypes_function decorator erases the struct it returns to Any.
        params: llama_cpp.llama_model_params = defaults()
        params.use_extra_bufts = repack
        return params

    bindings.llama_model_default_params = with_repack
    try:
        yield
    finally:
        bindings.llama_model_default_params = defaults


_TEMPLATE_KEY = "tokenizer.chat_template"


@contextmanager
def _templates_left_to_us() -> Iterator[None]:
    """While inside, llama_cpp.Llama reads the model's metadata without its chat templates.

    Llama.__init__ compiles every `tokenizer.chat_template*` it finds with jinja2, outside
    any limit: a template that does not parse fails the load (even of a model used for raw
    prompts), and constant folding runs parts of it (a "x" * 10**9 took gigabytes). We never
    use its chat handlers; our own renderer has the limits (app.engine.template_sandbox)."""
    model_class = llama_cpp.llama.internals.LlamaModel
    read_all = model_class.metadata

    def without_templates(model: llama_cpp.llama.internals.LlamaModel) -> dict[str, str]:
        return {k: v for k, v in read_all(model).items() if not k.startswith(_TEMPLATE_KEY)}

    model_class.metadata = without_templates  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        model_class.metadata = read_all  # type: ignore[method-assign]


def _chat_template(llm: llama_cpp.Llama) -> str | None:
    """The GGUF's chat template, read through llama.cpp once the model is loaded; one over
    the renderer's size limit only up to just past it (it is refused for its length)."""
    key = _TEMPLATE_KEY.encode()
    size = int(llama_cpp.llama_model_meta_val_str(llm._model.model, key, None, 0))
    if size < 0:
        return None
    size = min(size, RenderLimits().max_source_chars * 4 + 4)  # UTF-8: up to 4 bytes a char
    buffer = ctypes.create_string_buffer(size + 1)
    llama_cpp.llama_model_meta_val_str(llm._model.model, key, buffer, size + 1)
    return buffer.value.decode("utf-8", "replace")


def _is_one_token(llm: llama_cpp.Llama, text: str) -> bool:
    try:
        return len(llm.tokenize(text.encode(), add_bos=False, special=True)) == 1
    except Exception:  # noqa: BLE001 - a tokenizer hiccup only means "no"
        return False


# llama.cpp ends a refused load with these; the line before them says why.
_GENERIC_FAILURES = ("failed to load model", "failed to load model from file")
_REASON_PREFIXES = ("error loading model: ", "error loading model architecture: ")
# What ggml logs when the host's malloc fails (ggml.c ggml_aligned_malloc, ggml-backend.cpp):
# under the engine's ceiling that is the ceiling, not a GPU out of its memory.
_HOST_ALLOCATION_FAILED = ("insufficient memory", "failed to allocate CPU buffer")


def _out_of_memory() -> str:
    ceiling = engine_ceiling()
    if ceiling is None:
        return "The engine ran out of memory loading the model; a smaller context or model fits."
    return ceiling_sentence(ceiling)


_MAX_REASON_CHARS = 300  # the reason can quote the file's own strings (an architecture name)


def _failure_reason(lines: list[str]) -> str:
    """The most telling error line llama.cpp logged during a failed load ('unknown model
    architecture: 'x''), not its closing 'failed to load model'."""
    for line in reversed(lines):
        lower = line.lower()
        if "error" in lower or "failed" in lower or "cannot" in lower or "out of memory" in lower:
            reason = line.split(": ", 1)[-1].strip().rstrip(".")
            if reason.lower() in _GENERIC_FAILURES:
                continue
            for prefix in _REASON_PREFIXES:
                reason = reason.removeprefix(prefix)
            reason = "".join(c if c.isprintable() else " " for c in reason)
            return reason[:_MAX_REASON_CHARS]
    return ""


def _fa_kernel() -> str:
    """Which Flash Attention GPU kernels the loaded libraries carry: those of the folder the GPU
    library was actually loaded from (see loaded_libraries); with none loaded, llama-cpp-python's
    folder: LLAMA_CPP_LIB_PATH's when it is set (a chosen backend package), else its own."""
    loaded = loaded_folder(GPU_LIBRARY)
    if loaded is not None:
        return kernel_of_folder(loaded)
    chosen = os.environ.get("LLAMA_CPP_LIB_PATH")
    return kernel_of_folder(Path(chosen) if chosen else built_in_folder())


def _device_memory() -> tuple[SplitDevice, ...]:
    """Each device's memory after a load across workers (a worker's asked over the engine's
    own RPC connection: a second client would wait behind it)."""
    # Imported here, for a load across workers only: split_devices brings the backend store,
    # its signature checks (cryptography) and the memory probes (psutil), 0.1 s of imports
    # that every engine start paid for this one function.
    from app.engine.split_devices import as_split_devices

    try:
        found = devices.list_devices()
        cpu = [
            SplitDevice(d.name, "this machine", d.memory_free, d.memory_total)
            for d in found
            if d.kind == "CPU"
        ]
        return (*cpu[:1], *as_split_devices(found))  # this machine first, then split order
    except Exception as error:  # noqa: BLE001 - the dashboard's extra, never the load's failure
        log.warning("devices' memory not read after the load: %s", error)
        return ()
