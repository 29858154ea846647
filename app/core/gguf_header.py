"""Read a GGUF file's header (metadata and tensor table) without loading its weights.

A streaming `struct` parse over a byte prefix, so the Hub helper can parse the first few
MiB fetched with an HTTP range request, and a local read never maps the whole file.
Big arrays (the tokenizer's 262,144 tokens) are skipped and kept only as a summary.

    header = read_gguf_header(path)                  # a local file
    header = parse_gguf_header(prefix, total_size)   # raises GgufHeaderIncompleteError
                                                     # (.bytes_needed) when prefix is short
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, LlamaFileType

from app.core.errors import ModelFileMissingError, NotAGgufError, TruncatedGgufError

log = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
# Arrays longer than this are summarised (type and length), not kept.
MAX_KEPT_ARRAY = 4096
# First read of a local file; most headers (even with a 262k vocabulary) fit in 16 MiB.
_FIRST_READ = 8 * 1024 * 1024

# GGUF value type ids (gguf spec) -> struct format of one scalar.
_SCALAR_FORMATS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
_STRING, _ARRAY = 8, 9
_PREAMBLE = 24  # magic, version, tensor count, metadata count
_TYPE_NAMES = {
    0: "uint8",
    1: "int8",
    2: "uint16",
    3: "int16",
    4: "uint32",
    5: "int32",
    6: "float32",
    7: "bool",
    8: "string",
    9: "array",
    10: "uint64",
    11: "int64",
    12: "float64",
}


class GgufHeaderIncompleteError(TruncatedGgufError):
    """The byte prefix ends inside the header: fetch at least `bytes_needed` bytes and retry.

    `bytes_needed` is a lower bound (string lengths further on are not known yet); callers
    fetching over HTTP should ask for max(bytes_needed, 2 * len(prefix)).
    """

    def __init__(self, bytes_needed: int, have: int) -> None:
        super().__init__(
            f"The GGUF header needs at least {bytes_needed:,} bytes; only {have:,} were read."
        )
        self.bytes_needed = bytes_needed
        self.have = have


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
            return f"type{self.ggml_type}"

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def n_bytes(self) -> int:
        """Bytes of this tensor's data (ggml_nbytes for a contiguous tensor)."""
        block_values, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType(self.ggml_type)]
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

    @property
    def parameter_count(self) -> int:
        return sum(t.n_elements for t in self.tensors)

    @property
    def tensor_data_bytes(self) -> int:
        """Bytes of all tensor data (what the weights take in memory, unpadded)."""
        return sum(t.n_bytes for t in self.tensors)

    @property
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
            return f"type {ft}"
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


def _opt_int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int_or_list(value: Any) -> int | list[int]:
    if isinstance(value, list):
        return [int(v) for v in value]
    return int(value or 0)


def _at(value: int | list[int], layer: int) -> int:
    return value[layer] if isinstance(value, list) else value


# ---- parsing --------------------------------------------------------------------------


class _Cursor:
    """Reads little- or big-endian values from a prefix, raising when it runs out."""

    def __init__(self, data: bytes | memoryview, endian: str) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.endian = endian

    def need(self, n: int) -> None:
        if self.pos + n > len(self.data):
            raise GgufHeaderIncompleteError(self.pos + n, len(self.data))

    def scalar(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        self.need(size)
        (value,) = struct.unpack_from(self.endian + fmt, self.data, self.pos)
        self.pos += size
        return value

    def string(self) -> str:
        n = self.scalar("Q")
        self.need(n)
        raw = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return raw.decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        n = self.scalar("Q")
        self.need(n)
        self.pos += n


def _read_value(cur: _Cursor, vtype: int) -> Any:
    if vtype in _SCALAR_FORMATS:
        return cur.scalar(_SCALAR_FORMATS[vtype])
    if vtype == _STRING:
        return cur.string()
    if vtype == _ARRAY:
        etype = cur.scalar("I")
        count = cur.scalar("Q")
        if etype == _ARRAY:
            raise NotAGgufError(
                "The GGUF file has nested arrays, which this reader does not support."
            )
        if etype not in _SCALAR_FORMATS and etype != _STRING:
            raise NotAGgufError(f"The GGUF file has an unknown array element type {etype}.")
        if count > MAX_KEPT_ARRAY:
            _skip_array(cur, etype, count)
            return ArraySummary(_TYPE_NAMES[etype], count)
        if etype == _STRING:
            return [cur.string() for _ in range(count)]
        fmt = _SCALAR_FORMATS[etype]
        size = struct.calcsize(fmt)
        cur.need(size * count)
        values = list(struct.unpack_from(f"{cur.endian}{count}{fmt}", cur.data, cur.pos))
        cur.pos += size * count
        return values
    raise NotAGgufError(f"The GGUF file has an unknown metadata value type {vtype}.")


def _skip_array(cur: _Cursor, etype: int, count: int) -> None:
    if etype == _STRING:
        for _ in range(count):
            cur.skip_string()
        return
    size = struct.calcsize(_SCALAR_FORMATS[etype])
    cur.need(size * count)
    cur.pos += size * count


def _endian(data: bytes | memoryview) -> tuple[str, int]:
    if not GGUF_MAGIC.startswith(bytes(data[:4])) or (
        len(data) >= 4 and bytes(data[:4]) != GGUF_MAGIC
    ):
        raise NotAGgufError("The file is not a GGUF model (it does not start with 'GGUF').")
    if len(data) < 8:
        raise GgufHeaderIncompleteError(8, len(data))
    (le_version,) = struct.unpack_from("<I", data, 4)
    (be_version,) = struct.unpack_from(">I", data, 4)
    for endian, version in (("<", le_version), (">", be_version)):
        if version in (2, 3):
            return endian, version
    raise NotAGgufError(
        f"The GGUF file has version {le_version}, which is not supported (only versions 2 and 3)."
    )


def parse_gguf_header(data: bytes | memoryview, total_size: int | None = None) -> GgufHeader:
    """Parse a GGUF header from the first bytes of a file.

    `total_size` is the whole file's size when known: then a file that ends inside its
    header or before its last tensor's data raises TruncatedGgufError. A prefix too short
    for the header raises GgufHeaderIncompleteError with `bytes_needed`.
    """
    if total_size is not None and total_size < _PREAMBLE:
        raise NotAGgufError(f"The file is not a GGUF model (it is only {total_size} bytes).")
    try:
        return _parse(data, total_size)
    except GgufHeaderIncompleteError as error:
        if total_size is not None and error.bytes_needed > total_size:
            raise TruncatedGgufError(
                f"The GGUF file is truncated: it is {total_size:,} bytes "
                "and ends inside its header."
            ) from None
        raise


def _parse(data: bytes | memoryview, total_size: int | None) -> GgufHeader:
    endian, version = _endian(data)
    cur = _Cursor(data, endian)
    cur.pos = 8
    n_tensors = cur.scalar("Q")
    n_kv = cur.scalar("Q")
    metadata: dict[str, Any] = {}
    for _ in range(n_kv):
        key = cur.string()
        metadata[key] = _read_value(cur, cur.scalar("I"))
    tensors = []
    for _ in range(n_tensors):
        name = cur.string()
        n_dims = cur.scalar("I")
        if n_dims > 8:
            raise NotAGgufError(
                f"The GGUF tensor '{name}' claims {n_dims} dimensions; the file is corrupt."
            )
        cur.need(8 * n_dims)
        shape = struct.unpack_from(f"{endian}{n_dims}Q", cur.data, cur.pos)
        cur.pos += 8 * n_dims
        ggml_type = cur.scalar("I")
        offset = cur.scalar("Q")
        try:
            GGML_QUANT_SIZES[GGMLQuantizationType(ggml_type)]
        except (ValueError, KeyError):
            raise NotAGgufError(
                f"The GGUF tensor '{name}' has unknown type {ggml_type}; "
                "the file is corrupt or too new."
            ) from None
        tensors.append(TensorInfo(name, tuple(int(d) for d in shape), ggml_type, int(offset)))
    alignment = int(metadata.get("general.alignment", DEFAULT_ALIGNMENT) or DEFAULT_ALIGNMENT)
    header_bytes = cur.pos
    data_offset = -(-header_bytes // alignment) * alignment
    template = metadata.get("tokenizer.chat_template")
    header = GgufHeader(
        version=version,
        metadata=metadata,
        tensors=tuple(tensors),
        alignment=alignment,
        data_offset=data_offset,
        header_bytes=header_bytes,
        file_size=total_size,
        chat_template=template if isinstance(template, str) else None,
    )
    if total_size is not None and total_size < header.data_end:
        raise TruncatedGgufError(
            f"The GGUF file is truncated: it is {total_size:,} bytes but its tensors "
            f"need {header.data_end:,}."
        )
    return header


def read_gguf_header(path: str | os.PathLike[str]) -> GgufHeader:
    """Read and check a local GGUF file's header (reads only the header bytes)."""
    path = Path(path)
    if not path.is_file():
        raise ModelFileMissingError(f"The model file {path} does not exist.")
    total = path.stat().st_size
    with path.open("rb") as f:
        data = f.read(min(_FIRST_READ, total))
        while True:
            try:
                return parse_gguf_header(data, total)
            except GgufHeaderIncompleteError as error:
                want = min(total, max(error.bytes_needed, 2 * len(data)))
                log.debug(
                    "GGUF header of %s needs more than %d bytes; reading %d", path, len(data), want
                )
                data += f.read(want - len(data))
