"""What a GGUF file's header says: its metadata and tensor table, as one frozen value.

app.models.gguf_read reads it (from a file or a byte prefix) and app.models.gguf_validate
checks it; this module only holds the shape, so the checks and the KV arithmetic can take a
header without knowing how it was read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, LlamaFileType

# ggml type id -> (values per block, bytes per block): gguf-py's table, plus what the
# vendored llama.cpp knows beyond it (ggml.h: GGML_TYPE_Q2_0 = 42, 64 values in 18 bytes).
TENSOR_TYPE_SIZES: dict[int, tuple[int, int]] = {
    int(t): sizes for t, sizes in GGML_QUANT_SIZES.items()
} | {42: (64, 18)}
_EXTRA_TYPE_NAMES = {42: "Q2_0"}
_EXTRA_FILE_TYPE_NAMES = {41: "Q2_0"}


# Architectures whose memory is recurrent or hybrid: their cache is not a plain K/V cache.
NOT_PLAIN_KV = {
    "mamba",
    "mamba2",
    "rwkv6",
    "rwkv6qwen2",
    "rwkv7",
    "arwkv7",
    "jamba",
    "falcon-h1",
    "plamo2",
    "granitehybrid",
    "lfm2",
    "lfm2moe",
    "nemotron_h",
    "nemotron_h_moe",
    "qwen3next",
    "kimi-linear",
    "qwen35",
    "qwen35moe",
    "deepseek4",
    "minimax-01",
}


@dataclass(frozen=True)
class ArraySummary:
    """A metadata array too long to keep (tokenizer tokens, scores, merges)."""

    element_type: str
    length: int


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # ggml order: ne0 (row length) first
    ggml_type: int
    offset: int  # from the start of the data section

    @property
    def type_name(self) -> str:
        try:
            return GGMLQuantizationType(self.ggml_type).name
        except ValueError:
            return _EXTRA_TYPE_NAMES.get(self.ggml_type, f"type{self.ggml_type}")

    @cached_property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @cached_property  # the fit arithmetic asks for it hundreds of times per estimate
    def n_bytes(self) -> int:
        """Bytes of this tensor's data (ggml_nbytes for a contiguous tensor)."""
        block_values, block_bytes = TENSOR_TYPE_SIZES[self.ggml_type]
        rows = self.n_elements // self.shape[0] if self.shape and self.shape[0] else 0
        return rows * (self.shape[0] // block_values * block_bytes) if self.shape else 0


@dataclass(frozen=True)
class GgufHeader:
    version: int
    metadata: dict[str, Any]
    tensors: tuple[TensorInfo, ...]
    alignment: int
    data_offset: int  # where tensor data starts in the file
    header_bytes: int  # bytes of metadata + tensor table (before padding)
    file_size: int | None = None
    chat_template: str | None = field(default=None, repr=False)
    # key -> GGUF value type id as stored (9 for arrays): what the file declared, not guessed
    value_types: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    # ---- generic access -------------------------------------------------------------

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    def arch_get(self, suffix: str, default: Any = None) -> Any:
        """`<architecture>.<suffix>`, e.g. arch_get('context_length')."""
        return self.metadata.get(f"{self.architecture}.{suffix}", default)

    # ---- convenience ------------------------------------------------------------------

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", "unknown"))

    @property
    def name(self) -> str | None:
        value = self.metadata.get("general.name")
        return str(value) if value is not None else None

    @cached_property
    def parameter_count(self) -> int:
        return sum(t.n_elements for t in self.tensors)

    @cached_property
    def tensor_data_bytes(self) -> int:
        """Bytes of all tensor data (what the weights take in memory, unpadded)."""
        return sum(t.n_bytes for t in self.tensors)

    @cached_property
    def data_end(self) -> int:
        """File offset where the last tensor's data ends (the minimum valid file size)."""
        if not self.tensors:
            return self.header_bytes  # nothing follows (vocab-only files end unpadded)
        return self.data_offset + max(t.offset + t.n_bytes for t in self.tensors)

    @property
    def file_type(self) -> int | None:
        value = self.metadata.get("general.file_type")
        return int(value) if value is not None else None

    @property
    def quantization(self) -> str | None:
        """'Q4_K_M', 'Q8_0', 'F16', ... from general.file_type (None when absent)."""
        ft = self.file_type
        if ft is None:
            return None
        try:
            name = LlamaFileType(ft).name
        except ValueError:
            return _EXTRA_FILE_TYPE_NAMES.get(ft, f"type {ft}")
        return name.removeprefix("MOSTLY_").removeprefix("ALL_")

    @property
    def context_length(self) -> int | None:
        return _opt_int(self.arch_get("context_length"))

    @property
    def block_count(self) -> int:
        return int(self.arch_get("block_count", 0))

    @property
    def embedding_length(self) -> int:
        return int(self.arch_get("embedding_length", 0))

    @property
    def head_count(self) -> int | list[int]:
        return _int_or_list(self.arch_get("attention.head_count", 0))

    @property
    def head_count_kv(self) -> int | list[int]:
        """KV heads: one number, or one per layer (0 for layers without attention)."""
        value = self.arch_get("attention.head_count_kv")
        return self.head_count if value is None else _int_or_list(value)

    def head_count_kv_at(self, layer: int) -> int:
        return _at(self.head_count_kv, layer)

    def head_count_at(self, layer: int) -> int:
        return _at(self.head_count, layer)

    @property
    def key_length(self) -> int:
        """Head size of K (default: embedding_length / head_count, as llama.cpp does)."""
        value = self.arch_get("attention.key_length")
        if value is not None:
            return int(value)
        n_head = self.head_count_at(0)
        return self.embedding_length // n_head if n_head else 0

    @property
    def value_length(self) -> int:
        value = self.arch_get("attention.value_length")
        if value is not None:
            return int(value)
        n_head = self.head_count_at(0)
        return self.embedding_length // n_head if n_head else 0

    @property
    def sliding_window(self) -> int | None:
        return _opt_int(self.arch_get("attention.sliding_window"))

    @property
    def sliding_window_pattern(self) -> int | list[bool] | None:
        """As stored: a period (every Nth layer is global) or one bool per layer."""
        value = self.arch_get("attention.sliding_window_pattern")
        if value is None or isinstance(value, ArraySummary):
            return None
        if isinstance(value, list):
            return [bool(v) for v in value]
        return int(value)

    @property
    def vocab_size(self) -> int | None:
        tokens = self.metadata.get("tokenizer.ggml.tokens")
        if isinstance(tokens, ArraySummary):
            return tokens.length
        if isinstance(tokens, list):
            return len(tokens)
        return _opt_int(self.arch_get("vocab_size"))

    @property
    def has_chat_template(self) -> bool:
        return bool(self.chat_template)


def _opt_int(value: object) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int_or_list(value: Any) -> int | list[int]:
    if isinstance(value, list):
        return [int(v) for v in value]
    return int(value or 0)


def _at(value: int | list[int], layer: int) -> int:
    return value[layer] if isinstance(value, list) else value


# ---- parsing --------------------------------------------------------------------------
