"""Verify that the int8-K Flash Attention pair is compiled into this build AND used.

Two checks, because either can fail alone:
1. compiled: on CUDA/HIP builds, the K/V pair is in the system info's FA_QUANTS list;
2. used: a real model loaded with that pair, every layer on the GPU, decodes a few tokens
   (Flash Attention's vector kernel runs only then) and llama.cpp logs no
   "converting K and V to f16", no Flash Attention op moved to the CPU, and a K cache of
   the asked type.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.core.kv_types import KvMode


@dataclass
class VerifyReport:
    mode: str
    backends: tuple[str, ...]
    fa_pairs: tuple[str, ...] | None
    compiled: bool | None  # None: the backend does not restrict pairs (CPU, Vulkan)
    k_cache_types: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    tokens: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(model_path: str, mode: KvMode, n_ctx: int = 4096, n_gpu_layers: int = -1) -> VerifyReport:
    import llama_cpp  # before numpy: see FACTS (import order crashed loads on one machine)

    from app.engine import llama_log
    from app.engine.build_info import read_build_info
    from app.engine.log_parse import parse_log

    info = read_build_info()
    report = VerifyReport(
        mode=mode.label,
        backends=info.backends,
        fa_pairs=info.fa_pairs,
        compiled=info.has_fa_pair(mode.k.name, mode.v.name),
    )
    if report.compiled is False:
        report.problems.append(
            f"This build has no Flash Attention kernel for K={mode.k.name}/V={mode.v.name} "
            f"(FA_QUANTS = {','.join(info.fa_pairs or ())}); rebuild with "
            f"-DGGML_CUDA_FA_QUANTS naming {mode.k.name}-{mode.v.name}."
        )

    router = llama_log.install()
    router.take_lines()
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
        report.tokens = int(out["usage"]["completion_tokens"])
    finally:
        llm.close()
    router.flush()
    parsed = parse_log(router.take_lines(), expect_gpu=bool(info.gpu_backends) and n_gpu_layers != 0)

    report.k_cache_types = [c.k_type for c in parsed.kv_caches]
    report.warnings = [w.text for w in parsed.warnings]
    if not parsed.kv_caches:
        report.problems.append("llama.cpp logged no KV cache line; cannot tell which K type it used.")
    elif any(t != mode.k.name for t in report.k_cache_types):
        report.problems.append(f"The K cache is {report.k_cache_types}, not {mode.k.name}.")
    for warning in parsed.warnings:
        report.problems.append(f"llama.cpp: {warning.text}")
    if report.tokens == 0:
        report.problems.append("The model generated no tokens, so Flash Attention never ran.")
    return report


def format_report(report: VerifyReport) -> str:
    compiled = {True: "yes", False: "NO", None: "not restricted by this backend"}[report.compiled]
    lines = [
        f"build backends:        {', '.join(report.backends) or 'unknown'}",
        f"FA pairs compiled:     {', '.join(report.fa_pairs) if report.fa_pairs else 'not reported (CPU/Vulkan handle every pair)'}",
        f"K/V asked:             {report.mode}  (compiled: {compiled})",
        f"K cache type(s) used:  {', '.join(report.k_cache_types) or 'none logged'}",
        f"tokens decoded:        {report.tokens}",
        f"warnings:              {len(report.warnings)}",
    ]
    lines += [f"  - {w}" for w in report.warnings]
    lines.append("RESULT: int8-K path verified" if report.ok else "RESULT: NOT verified")
    lines += [f"  * {p}" for p in report.problems]
    return "\n".join(lines)
