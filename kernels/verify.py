"""Verify that the int8-K Flash Attention pair is compiled into this build AND used.

Three checks, because each can fail alone:
1. compiled: on CUDA/HIP builds, the K/V pair is in the system info's FA_QUANTS list;
2. used: a real model loaded with that pair, every layer on the GPU, decodes a few tokens
   (Flash Attention's vector kernel runs only then) and llama.cpp logs no
   "converting K and V to f16", no Flash Attention op moved to the CPU, and a K cache of
   the asked type;
3. machine code: on CUDA/HIP builds, the installed libggml-cuda.so / libggml-hip.so's
   flash_attn_ext_vec kernels for the pair are read (kernels/lib_isa.py): every q8_0-K kernel
   must hold the int8 dot instruction (IDP.4A, v_dot4_i32_iu8) and the f16 control none. When
   the disassembler is missing this says which tool, and counts nothing.

"Verified" is said only when a GPU backend ran the pair with its KV cache on the GPU. On a
CPU-only build (or with no layer on the GPU) no GPU kernel is involved: K is still stored as
q8_0 and the CPU's own Flash Attention computes with it, and the report says exactly that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from app.kv.kv_types import KvMode
from kernels.isa_verdict import LibraryIsa
from kernels.lib_isa import BACKENDS, count_installed, summary_lines

if TYPE_CHECKING:
    from llama_cpp.llama_types import CreateCompletionResponse


@dataclass
class VerifyReport:
    mode: str
    backends: tuple[str, ...]
    fa_pairs: tuple[str, ...] | None
    compiled: bool | None  # None: the backend does not restrict pairs (CPU, Vulkan)
    k_cache_types: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    kv_devices: list[str] = field(default_factory=list)  # buffers the KV cache was allocated in
    tokens: int = 0
    problems: list[str] = field(default_factory=list)
    isa: LibraryIsa | None = None  # the instruction count, on CUDA/HIP builds

    @property
    def ok(self) -> bool:
        """Nothing went wrong: the K cache has the asked type, tokens decoded, no warning."""
        return not self.problems

    @property
    def on_gpu(self) -> bool:
        """A GPU backend held the KV cache, so its Flash Attention kernel ran on it."""
        # "CPU" and host-memory buffers ("CUDA_Host") mean attention reads the cache on the CPU.
        return any(not d.startswith("CPU") and not d.endswith("_Host") for d in self.kv_devices)

    @property
    def verified(self) -> bool:
        """The pair ran on a GPU backend without any fallback: the claim `verify` exists for."""
        return self.ok and self.on_gpu


def verify(
    model_path: str,
    mode: KvMode,
    n_ctx: int = 4096,
    n_gpu_layers: int = -1,
    count_isa: bool = True,
) -> VerifyReport:
    import llama_cpp  # before numpy: see docs/llama-cpp-notes.md (import order)

    from app.engine import llama_log
    from app.engine.build_info import read_build_info
    from app.engine.loader import weights_repacked
    from app.engine.log_parse import parse_log

    info = read_build_info()
    report = VerifyReport(
        mode=mode.label,
        backends=info.backends,
        fa_pairs=info.fa_pairs,
        compiled=info.has_fa_pair(mode),
    )
    if report.compiled is False:
        report.problems.append(
            f"This build has no Flash Attention kernel for K={mode.k.name}/V={mode.v.name} "
            f"(FA_QUANTS = {','.join(info.fa_pairs or ())}); rebuild with "
            f"-DGGML_CUDA_FA_QUANTS naming {mode.k.name}-{mode.v.name}."
        )

    router = llama_log.install()
    router.take_lines()
    with weights_repacked(False):  # as the engine loads: repacked weights crash AMX CPUs
        llm = llama_cpp.Llama(
            model_path=model_path,
            n_ctx=n_ctx,
            n_gpu_layers=n_gpu_layers,
            flash_attn=True,
            type_k=mode.k.ggml_id,
            type_v=mode.v.ggml_id,
            verbose=True,
        )
    try:
        out = llm.create_completion("The capital of France is", max_tokens=16, temperature=0.0)
        # Without stream=True llama-cpp-python returns one response, though it is typed as
        # "a response or an iterator of them".
        response = cast("CreateCompletionResponse", out)
        report.tokens = int(response["usage"]["completion_tokens"])
    finally:
        llm.close()
    router.flush()
    parsed = parse_log(
        router.take_lines(), expect_gpu=bool(info.gpu_backends) and n_gpu_layers != 0
    )

    report.k_cache_types = [c.k_type for c in parsed.kv_caches]
    report.kv_devices = list(dict.fromkeys(d for c in parsed.kv_caches for d in c.devices))
    report.warnings = [w.text for w in parsed.warnings]
    if not parsed.kv_caches:
        report.problems.append(
            "llama.cpp logged no KV cache line; cannot tell which K type it used."
        )
    elif any(t != mode.k.name for t in report.k_cache_types):
        report.problems.append(f"The K cache is {report.k_cache_types}, not {mode.k.name}.")
    for warning in parsed.warnings:
        report.problems.append(f"llama.cpp: {warning.text}")
    if report.tokens == 0:
        report.problems.append("The model generated no tokens, so Flash Attention never ran.")
    backend = next((BACKENDS[b] for b in info.backends if b in BACKENDS), None)
    if backend and count_isa:
        add_isa(report, _count(backend, f"{mode.k.name}-{mode.v.name}"))
    return report


def _count(backend: str, pair: str) -> LibraryIsa:
    try:
        return count_installed(backend, pair)
    except OSError as error:  # a tool that is there but failed: say so, count nothing
        return LibraryIsa("", "", missing=str(error))


def add_isa(report: VerifyReport, isa: LibraryIsa) -> None:
    """A q8_0-K kernel without the instruction, or a control with it, fails the verification;
    a missing tool does not (the report names it, and the runtime checks still stand)."""
    report.isa = isa
    report.problems += isa.problems


def verdict(report: VerifyReport) -> str:
    """One line that says what was checked, never more than that."""
    if not report.ok:
        return "RESULT: NOT verified"
    if report.verified:
        k = report.mode.split("/")[0]
        path = "int8-K path" if k == "q8_0" else f"K={k} path (not int8-K)"
        return (
            f"RESULT: {path} verified: {', '.join(report.kv_devices)} ran Flash Attention "
            f"with K={k} and no fallback"
        )
    return (
        "RESULT: no GPU Flash Attention kernel is involved here (KV cache on the CPU): "
        f"K is stored as {', '.join(dict.fromkeys(report.k_cache_types))} and the CPU path "
        "computes with it; nothing GPU-side was verified"
    )


def format_report(report: VerifyReport) -> str:
    compiled = {True: "yes", False: "NO", None: "not restricted by this backend"}[report.compiled]
    pairs = (
        ", ".join(report.fa_pairs)
        if report.fa_pairs
        else "not reported (CPU/Vulkan handle every pair)"
    )
    lines = [
        f"build backends:        {', '.join(report.backends) or 'unknown'}",
        f"FA pairs compiled:     {pairs}",
        f"K/V asked:             {report.mode}  (compiled: {compiled})",
        f"K cache type(s) used:  {', '.join(report.k_cache_types) or 'none logged'}",
        f"KV cache allocated in: {', '.join(report.kv_devices) or 'not logged'}",
        f"tokens decoded:        {report.tokens}",
        f"warnings:              {len(report.warnings)}",
    ]
    lines += [f"  - {w}" for w in report.warnings]
    if report.isa is not None:
        lines += summary_lines(report.isa)
    lines.append(verdict(report))
    lines += [f"  * {p}" for p in report.problems]
    return "\n".join(lines)
