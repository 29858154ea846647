"""KV cache types llama.cpp accepts for K and V, with their ggml ids and block sizes.

Block sizes come from ggml itself (through the `gguf` package's GGML_QUANT_SIZES), so
q8_0 is 34 bytes per 32 values because ggml says so, not because we typed it.
"""

from __future__ import annotations

from dataclasses import dataclass

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

from app.kv.kv_type_names import KV_TYPE_NAMES as _SUPPORTED
from app.platform.errors import UnknownKvTypeError


@dataclass(frozen=True)
class KvType:
    name: str  # as llama.cpp writes it: "q8_0"
    ggml_id: int  # GGML_TYPE_* value passed to llama_cpp.Llama(type_k=..., type_v=...)
    block_values: int  # values per block
    block_bytes: int  # bytes per block

    def row_bytes(self, n_values: int) -> int:
        """Bytes ggml uses for a row of n_values (ggml_row_size)."""
        return n_values // self.block_values * self.block_bytes


def _build() -> dict[str, KvType]:
    types = {}
    for name in _SUPPORTED:
        qtype = GGMLQuantizationType[name.upper()]
        block_values, block_bytes = GGML_QUANT_SIZES[qtype]
        types[name] = KvType(name, int(qtype), block_values, block_bytes)
    return types


KV_TYPES: dict[str, KvType] = _build()


def kv_type(name: str) -> KvType:
    """The cache type called `name` (case-insensitive), or UnknownKvTypeError."""
    try:
        return KV_TYPES[name.strip().lower()]
    except KeyError:
        raise UnknownKvTypeError(
            f"Unknown KV cache type '{name}'; use one of: {', '.join(_SUPPORTED)}."
        ) from None


def kv_type_by_id(ggml_id: int) -> KvType:
    for t in KV_TYPES.values():
        if t.ggml_id == ggml_id:
            return t
    raise UnknownKvTypeError(f"Unknown KV cache type id {ggml_id}.")


@dataclass(frozen=True)
class KvMode:
    """A K/V pair, written 'q8_0/f16' in the CLI and the UI."""

    k: KvType
    v: KvType

    @property
    def label(self) -> str:
        return f"{self.k.name}/{self.v.name}"

    @classmethod
    def parse(cls, text: str) -> KvMode:
        """Parse 'K/V' (or one type for both). Raises UnknownKvTypeError."""
        parts = text.split("/")
        if len(parts) == 1:
            parts = parts * 2
        if len(parts) != 2 or not all(p.strip() for p in parts):
            raise UnknownKvTypeError(f"KV mode '{text}' must be written K/V, for example q8_0/f16.")
        return cls(kv_type(parts[0]), kv_type(parts[1]))


DEFAULT_KV_MODE = KvMode.parse("q8_0/f16")
FP16_KV_MODE = KvMode.parse("f16/f16")
COMPARE_MODES = (FP16_KV_MODE, DEFAULT_KV_MODE, KvMode.parse("q8_0/q8_0"))
