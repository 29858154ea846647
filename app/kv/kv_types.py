"""The K/V cache types llama.cpp accepts, and the one list of K/V modes the app names.

A type is a name llama.cpp's `--cache-type-k/-v` accepts (common/arg.cpp kv_cache_types). Its
ggml id and block size come from ggml itself (through the `gguf` package's GGML_QUANT_SIZES),
so q8_0 is 34 bytes per 32 values because ggml says so, not because we typed it. They are looked
up when first asked for: `gguf` imports numpy, and this module is imported where numpy must not
be yet (every CLI start checks the settings; the engine imports llama_cpp before numpy).

A mode is a K type and a V type. It is written "q8_0/f16" (its label, in the CLI and the UI) or
"q8_0-f16" (its pair, as llama.cpp's FA_QUANTS and CMake name the compiled Flash Attention
pairs); both parse. KV_MODES is the one list of the modes the app names, with each one's role:
a new mode is one line there.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from app.platform.errors import UnknownKvTypeError

KV_TYPE_NAMES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")


@functools.cache
def _ggml_sizes(name: str) -> tuple[int, int, int]:
    """(ggml id, values per block, bytes per block) of a type, from the gguf package."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    qtype = GGMLQuantizationType[name.upper()]
    block_values, block_bytes = GGML_QUANT_SIZES[qtype]
    return int(qtype), block_values, block_bytes


@dataclass(frozen=True)
class KvType:
    name: str  # as llama.cpp writes it: "q8_0"

    @property
    def ggml_id(self) -> int:
        """GGML_TYPE_* value passed to llama_cpp.Llama(type_k=..., type_v=...)."""
        return _ggml_sizes(self.name)[0]

    @property
    def block_values(self) -> int:
        return _ggml_sizes(self.name)[1]

    @property
    def block_bytes(self) -> int:
        return _ggml_sizes(self.name)[2]

    def row_bytes(self, n_values: int) -> int:
        """Bytes ggml uses for a row of n_values (ggml_row_size)."""
        _, block_values, block_bytes = _ggml_sizes(self.name)
        return n_values // block_values * block_bytes


KV_TYPES: dict[str, KvType] = {name: KvType(name) for name in KV_TYPE_NAMES}


def kv_type(name: str) -> KvType:
    """The cache type called `name` (case-insensitive), or UnknownKvTypeError."""
    try:
        return KV_TYPES[name.strip().lower()]
    except KeyError:
        raise UnknownKvTypeError(
            f"Unknown KV cache type '{name}'; use one of: {', '.join(KV_TYPE_NAMES)}."
        ) from None


def kv_type_by_id(ggml_id: int) -> KvType:
    for t in KV_TYPES.values():
        if t.ggml_id == ggml_id:
            return t
    raise UnknownKvTypeError(f"Unknown KV cache type id {ggml_id}.")


@dataclass(frozen=True)
class KvMode:
    """A K/V pair: its label "q8_0/f16" in the CLI and the UI, its pair "q8_0-f16" in llama.cpp's
    list of compiled Flash Attention pairs."""

    k: KvType
    v: KvType

    @property
    def label(self) -> str:
        return f"{self.k.name}/{self.v.name}"

    @property
    def pair(self) -> str:
        return f"{self.k.name}-{self.v.name}"

    @property
    def words(self) -> str:
        """As the status bar and the settings say it: "K q8_0 / V f16"."""
        return f"K {self.k.name} / V {self.v.name}"

    @property
    def role(self) -> str:
        """What the mode is for, in a few words ("" for a mode KV_MODES does not name)."""
        return _ROLES.get(self, "")

    @classmethod
    def of(cls, type_k: str, type_v: str) -> KvMode:
        """The mode of two type names. Raises UnknownKvTypeError."""
        return cls(kv_type(type_k), kv_type(type_v))

    @classmethod
    def parse(cls, text: str) -> KvMode:
        """Parse 'K/V' or 'K-V' (or one type for both). Raises UnknownKvTypeError."""
        separator = "-" if "/" not in text and "-" in text else "/"
        parts = text.split(separator)
        if len(parts) == 1:
            parts = parts * 2
        if len(parts) != 2 or not all(p.strip() for p in parts):
            raise UnknownKvTypeError(f"KV mode '{text}' must be written K/V, for example q8_0/f16.")
        return cls.of(parts[0], parts[1])


# The modes the app names, with their roles: the comparison's three (in the order measured), and
# 4-bit K and V for the fit table of a backend that has them. A new mode is one line here.
_ROLES: dict[KvMode, str] = {
    KvMode.of("f16", "f16"): "fp16 baseline",
    KvMode.of("q8_0", "f16"): "int8-K",
    KvMode.of("q8_0", "q8_0"): "int8 K and V",
    KvMode.of("q4_0", "q4_0"): "4-bit K and V",
}
KV_MODES: tuple[KvMode, ...] = tuple(_ROLES)
FP16_KV_MODE, DEFAULT_KV_MODE, INT8_KV_MODE = KV_MODES[:3]
COMPARE_MODES = (FP16_KV_MODE, DEFAULT_KV_MODE, INT8_KV_MODE)
