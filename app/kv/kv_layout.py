"""Which layers of a model keep K/V, in which cache, and how wide: read from a GGUF header.

Mirrors llama.cpp 0.3.36 (vendor/llama.cpp/src):
- llama-model.cpp load_hparams: n_head_kv defaults to n_head and may be per layer;
  key/value_length default to n_embd / n_head; *_length_swa override them on SWA layers;
  nextn (MTP) layers are filtered out of the main context's cache.
- llama-hparams.cpp: n_embd_k_gqa(il) = n_embd_head_k(il) * n_head_kv(il);
  set_swa_pattern(n, dense_first): layer il is SWA when il % n < n - 1 (or il % n != 0).
- models/<arch>.cpp load_arch_hparams: which architectures use sliding windows, their
  default pattern period and default window (the table below).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.models.gguf_header import NOT_PLAIN_KV, GgufHeader


@dataclass(frozen=True)
class _SwaRule:
    period: int  # default sliding_window_pattern
    dense_first: bool = False
    default_window: int = 0  # used when the GGUF has no sliding_window key
    needs_key: bool = True  # SWA only when the GGUF sets sliding_window > 0
    chunked: bool = False


# From models/<arch>.cpp (load_arch_hparams) of the vendored llama.cpp.
_SWA_RULES: dict[str, _SwaRule] = {
    "gemma2": _SwaRule(2, default_window=4096, needs_key=False),
    "gemma3": _SwaRule(6),
    "gemma3n": _SwaRule(5, needs_key=False),
    "cohere2": _SwaRule(4, needs_key=False),
    "cohere2moe": _SwaRule(4, dense_first=True, needs_key=False),
    "gpt-oss": _SwaRule(2, needs_key=False),
    "olmo2": _SwaRule(4),
    "afmoe": _SwaRule(4),
    "llama4": _SwaRule(4, default_window=8192, needs_key=False, chunked=True),
}

# Architectures with layers that reuse another layer's KV (n_layer_kv_from_start).
_KV_FROM_START = {"gemma3n": 20}


@dataclass(frozen=True)
class KvLayer:
    index: int
    swa: bool
    n_embd_k_gqa: int  # K values per token in this layer
    n_embd_v_gqa: int
    head_k: int
    head_v: int


@dataclass(frozen=True)
class KvLayout:
    """The KV-bearing layers of a model, split into the global and sliding-window caches."""

    architecture: str
    layers: tuple[KvLayer, ...]
    n_swa: int  # sliding window in tokens (0: no SWA cache)
    exact: bool  # False when this architecture is outside what the arithmetic mirrors
    note: str = ""
    n_embd_v_gqa_max: int = 0

    @property
    def has_swa(self) -> bool:
        return self.n_swa > 0 and any(layer.swa for layer in self.layers)

    def cache_layers(self, swa: bool) -> tuple[KvLayer, ...]:
        return tuple(layer for layer in self.layers if layer.swa == swa)


def _swa_flags(header: GgufHeader, n_layer: int, rule: _SwaRule) -> list[bool]:
    pattern = header.sliding_window_pattern
    if isinstance(pattern, list):
        return [bool(pattern[i]) if i < len(pattern) else False for i in range(n_layer)]
    period = rule.period if pattern is None else pattern
    if rule.dense_first:
        return [period == 0 or i % period != 0 for i in range(n_layer)]
    return [period == 0 or i % period < period - 1 for i in range(n_layer)]


def kv_layout(header: GgufHeader) -> KvLayout:
    """The KV layout llama.cpp builds for this model (see the module docstring)."""
    arch = header.architecture
    n_layer_all = header.block_count
    n_nextn = int(header.arch_get("nextn_predict_layers", 0) or 0)
    n_layer = n_layer_all - n_nextn  # nextn layers are filtered out of the main cache
    exact = arch not in NOT_PLAIN_KV
    notes = []
    if not exact:
        notes.append(
            f"'{arch}' keeps a recurrent state besides K/V; only the attention layers are counted."
        )

    window = header.sliding_window
    rule = _SWA_RULES.get(arch)
    n_swa = 0
    swa = [False] * n_layer
    if rule is not None:
        if rule.needs_key and not (window or 0) > 0 or arch == "llama4" and window == 0:
            n_swa = 0
        else:
            n_swa = (
                window if (window and not rule.chunked) else (rule.default_window or window or 0)
            )
            swa = _swa_flags(header, n_layer, rule)
    elif window:
        exact = False
        notes.append(
            f"The sliding-window layout of '{arch}' is not known here; all layers are counted "
            "at full context (an upper bound)."
        )

    head_k, head_v = header.key_length, header.value_length
    head_k_swa = int(header.arch_get("attention.key_length_swa", head_k))
    head_v_swa = int(header.arch_get("attention.value_length_swa", head_v))
    kv_from_start = _KV_FROM_START.get(arch)
    layers = []
    v_max = 0
    for il in range(n_layer_all):
        is_swa = swa[il] if il < n_layer else False
        hk, hv = (head_k_swa, head_v_swa) if is_swa else (head_k, head_v)
        n_kv = header.head_count_kv_at(il)
        v_max = max(v_max, hv * n_kv)
        if il >= n_layer or (kv_from_start is not None and il >= kv_from_start):
            continue
        layers.append(KvLayer(il, is_swa, hk * n_kv, hv * n_kv, hk, hv))
    return KvLayout(arch, tuple(layers), n_swa, exact, " ".join(notes), v_max)
