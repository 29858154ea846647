"""Parse llama.cpp's log text into the structured events of app.engine.messages.

Pure functions over strings (no llama_cpp import), so they are tested on real log
samples without a model. Formats come from the vendored llama.cpp of llama-cpp-python
0.3.36:

- src/llama-kv-cache.cpp:     ``%s: size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs),
                               K (%s): %7.2f MiB, V (%s): %7.2f MiB``
                               ``%s: %10s KV buffer size = %8.2f MiB``
- src/llama-kv-cache-iswa.cpp: ``creating non-SWA KV cache`` / ``creating     SWA KV cache``
                               before each of its two caches' lines
- src/llama-context.cpp:      ``%s: %10s compute buffer size = %8.2f MiB`` (%s: sched_reserve)
- warnings meaning the int8-K Flash Attention kernel is not what runs: the CUDA/HIP "no
  FlashAttention vector kernel compiled for K/V types %s-%s, converting K and V to f16
  instead (slow)" (ggml-cuda/fattn.cu), "layer %d is assigned to device %s but Flash
  Attention is assigned to device CPU (usually due to missing support)" and "Flash Attention
  not supported, set to disabled" (llama_context::resolve_fused_ops), "flash_attn is not
  compatible with ... - forcing off", ``flash_attn = disabled`` (llama_context). The same
  lines with another fused op's name (Gated Delta Net, ...) are not about attention.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from app.engine.messages import (
    ComputeBufferInfo,
    KernelWarning,
    KernelWarningKind,
    KvCacheInfo,
)

MIB = 1024 * 1024

_NUM = r"(\d+(?:\.\d+)?)"

_KV_CACHE_RE = re.compile(
    r"llama_kv_cache:\s+size\s*=\s*" + _NUM + r"\s*MiB\s*"
    r"\(\s*(\d+)\s+cells,\s*(\d+)\s+layers,\s*(\d+)\s*/\s*(\d+)\s+seqs\),\s*"
    r"K\s*\(([\w.]+)\):\s*" + _NUM + r"\s*MiB,\s*"
    r"V\s*\(([\w.]+)\):\s*" + _NUM + r"\s*MiB"
)
_KV_BUFFER_RE = re.compile(r"llama_kv_cache:\s+(\S+)\s+KV buffer size\s*=\s*" + _NUM + r"\s*MiB")
# Logged by llama_context::sched_reserve (older llama.cpp: llama_context) as "<func>: <buft> ...".
_COMPUTE_RE = re.compile(r"^\s*\w+:\s+(\S+)\s+compute buffer size\s*=\s*" + _NUM + r"\s*MiB")
_ISWA_RE = re.compile(r"llama_kv_cache_iswa:\s+creating\s+(non-SWA|SWA)\s+KV cache")
_LAYER_ON_CPU_RE = re.compile(r"load_tensors:\s+layer\s+\d+\s+assigned to device CPU\b")

# (kind, pattern) in the order they are tried; the first match wins.
_WARNING_PATTERNS: tuple[tuple[KernelWarningKind, re.Pattern[str]], ...] = (
    (
        "pair_not_compiled",
        re.compile(r"no FlashAttention \w+ kernel compiled for K/V types", re.IGNORECASE),
    ),
    ("converted_to_f16", re.compile(r"converting K and V to f16", re.IGNORECASE)),
    (
        "attention_on_cpu",
        re.compile(r"Flash Attention is assigned to device CPU\b.*missing support"),
    ),
    ("fa_disabled", re.compile(r"Flash Attention not supported, set to disabled", re.IGNORECASE)),
    ("fa_disabled", re.compile(r"flash_attn\b.*forcing off", re.IGNORECASE)),
    ("fa_disabled", re.compile(r"disabling flash attention", re.IGNORECASE)),
    ("fa_disabled", re.compile(r"flash_attn\s*=\s*disabled\b")),
    ("fa_disabled", re.compile(r"quantized V cache requires flash_attn")),
)


def mib_to_bytes(mib: float) -> int:
    """Bytes for a MiB figure llama.cpp printed (exact only to its 2 decimals)."""
    return round(mib * MIB)


def parse_kv_cache_line(line: str, swa: bool = False) -> KvCacheInfo | None:
    """The KvCacheInfo of one ``llama_kv_cache: size = ...`` line, else None.

    `swa` is not in the line itself: llama_kv_cache_iswa logs which cache it is creating
    just before; LogParser tracks that.
    """
    match = _KV_CACHE_RE.search(line)
    if match is None:
        return None
    total, cells, layers, seqs, _streams, k_type, k_mib, v_type, v_mib = match.groups()
    return KvCacheInfo(
        total_bytes=mib_to_bytes(float(total)),
        cells=int(cells),
        layers=int(layers),
        seqs=int(seqs),
        k_type=k_type,
        k_bytes=mib_to_bytes(float(k_mib)),
        v_type=v_type,
        v_bytes=mib_to_bytes(float(v_mib)),
        swa=swa,
        total_mib=float(total),
        k_mib=float(k_mib),
        v_mib=float(v_mib),
        line=line.strip(),
    )


def parse_kv_buffer_line(line: str) -> tuple[str, float] | None:
    """(buffer name, MiB) of a ``llama_kv_cache: CPU KV buffer size = X MiB`` line."""
    match = _KV_BUFFER_RE.search(line)
    if match is None:
        return None
    return match.group(1), float(match.group(2))


def parse_compute_buffer_line(line: str) -> ComputeBufferInfo | None:
    """The ComputeBufferInfo of a ``sched_reserve: CPU compute buffer size = X MiB`` line."""
    match = _COMPUTE_RE.search(line)
    if match is None:
        return None
    mib = float(match.group(2))
    return ComputeBufferInfo(device=match.group(1), bytes=mib_to_bytes(mib), mib=mib)


def parse_iswa_line(line: str) -> bool | None:
    """True if the line announces the sliding-window cache, False for the global one,
    None when it is not such a line."""
    match = _ISWA_RE.search(line)
    if match is None:
        return None
    return match.group(1) == "SWA"


def classify_warning(line: str) -> KernelWarning | None:
    """A KernelWarning when the line means the int8-K Flash Attention kernel is not what
    runs (K/V pair not compiled or converted to f16, attention on the CPU, Flash Attention
    off), else None."""
    for kind, pattern in _WARNING_PATTERNS:
        if pattern.search(line):
            return KernelWarning(kind=kind, text=line.strip())
    return None


@dataclass
class ParsedLog:
    kv_caches: list[KvCacheInfo] = field(default_factory=list)
    compute_buffers: list[ComputeBufferInfo] = field(default_factory=list)
    warnings: list[KernelWarning] = field(default_factory=list)
    layers_on_cpu: int = 0  # load_tensors lines placing a layer on the CPU


class LogParser:
    """Feeds llama.cpp log lines in order and collects what they say.

    `expect_gpu`: layers were asked to go to a GPU, so a layer placed on the CPU is a
    warning (on a CPU build it is simply where everything runs).
    """

    def __init__(self, expect_gpu: bool = False) -> None:
        self.expect_gpu = expect_gpu
        self.result = ParsedLog()
        self._next_swa = False
        self._kv_devices: list[tuple[str, float]] = []
        self._seen_warnings: set[str] = set()

    def feed(self, line: str) -> None:
        swa = parse_iswa_line(line)
        if swa is not None:
            self._next_swa = swa
            return
        buffer = parse_kv_buffer_line(line)
        if buffer is not None:
            self._kv_devices.append(buffer)
            return
        cache = parse_kv_cache_line(line, swa=self._next_swa)
        if cache is not None:
            if self._kv_devices:
                names, mib = zip(*self._kv_devices, strict=True)
                cache = replace(cache, devices=names, device_mib=mib)
            self._kv_devices = []
            self._next_swa = False
            self.result.kv_caches.append(cache)
            return
        compute = parse_compute_buffer_line(line)
        if compute is not None:
            self.result.compute_buffers.append(compute)
            return
        if _LAYER_ON_CPU_RE.search(line):
            self.result.layers_on_cpu += 1
            return
        warning = classify_warning(line)
        if warning is not None and warning.text not in self._seen_warnings:
            self._seen_warnings.add(warning.text)
            self.result.warnings.append(warning)

    def finish(self) -> ParsedLog:
        """The parsed result, with a summary warning for layers the GPU did not get."""
        if self.expect_gpu and self.result.layers_on_cpu:
            self.result.warnings.append(
                KernelWarning(
                    kind="attention_on_cpu",
                    text=f"{self.result.layers_on_cpu} layer(s) assigned to device CPU",
                )
            )
            self.result.layers_on_cpu = 0
        return self.result


def parse_log(lines: Iterable[str], expect_gpu: bool = False) -> ParsedLog:
    """Parse a whole log (an iterable of lines) at once."""
    parser = LogParser(expect_gpu=expect_gpu)
    for line in lines:
        parser.feed(line)
    return parser.finish()
