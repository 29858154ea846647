"""Read a GGUF file's header (metadata and tensor table) without loading its weights.

A streaming `struct` parse over a byte prefix, so the Hub helper can parse the first few
MiB fetched with an HTTP range request, and a local read never maps the whole file.
Big arrays (the tokenizer's 262,144 tokens) are skipped and kept only as a summary.

Every header is validated before it is returned (app.models.gguf_validate): the parse stays
within that module's caps (header bytes, counts, string and array lengths, kept values), and
a header that is malformed, hostile or inconsistent raises InvalidGgufError with one line.

    header = read_gguf_header(path)                  # a local file
    header = parse_gguf_header(prefix, total_size)   # raises GgufHeaderIncompleteError
                                                     # (.bytes_needed) when prefix is short
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Container, Mapping
from pathlib import Path
from typing import IO, Any

from app.models import gguf_validate as limits
from app.models.gguf_header import TENSOR_TYPE_SIZES, ArraySummary, GgufHeader, TensorInfo
from app.models.gguf_validate import check_header, refuse, shown
from app.models.recent_headers import read_through
from app.platform import units
from app.platform.errors import ModelFileMissingError, NotAGgufError, TruncatedGgufError

log = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
# Arrays longer than this are summarised (type and length), not kept.
MAX_KEPT_ARRAY = 4096
# First read of a local file; most headers (even with a 262k vocabulary) fit in 8 MiB.
_FIRST_READ = 8 * 1024 * 1024
MAX_HEADER_BYTES = limits.MAX_HEADER_BYTES

# GGUF value type ids (gguf spec) -> struct format of one scalar, and its compiled
# little-endian struct (compiled once: the reader unpacks tens of thousands of fields).
_SCALAR_FORMATS = dict(zip((0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12), "BbHhIif?Qqd", strict=True))
_SCALARS = {vtype: struct.Struct("<" + fmt) for vtype, fmt in _SCALAR_FORMATS.items()}
_U32, _U64 = _SCALARS[4], _SCALARS[10]
# A tensor-table entry after its name: n_dims (read first), then the dimensions, type, offset.
_TENSOR_TAILS = {d: struct.Struct(f"<{d}QIQ") for d in range(1, limits.MAX_DIMS + 1)}
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


class _Cursor:
    """Reads little-endian values from a prefix, raising when it runs out (then the reader
    fetches more) or when a count or length is past the caps of app.models.gguf_validate."""

    def __init__(self, data: bytes | memoryview) -> None:
        self.data = memoryview(data)
        self.end = len(self.data)
        self.pos = 0
        self.kept = 0  # bytes of decoded values kept so far (MAX_KEPT_BYTES)

    def need(self, n: int) -> None:
        if self.pos + n > self.end:
            raise GgufHeaderIncompleteError(self.pos + n, self.end)

    def scalar(self, layout: struct.Struct) -> Any:
        """One value of `layout` (_SCALARS, _U32, _U64)."""
        pos = self.pos
        end = pos + layout.size
        if end > self.end:
            raise GgufHeaderIncompleteError(end, self.end)
        self.pos = end
        return layout.unpack_from(self.data, pos)[0]

    def raw(self, limit: int, what: str) -> memoryview:
        """A GGUF string's bytes (u64 length, then the bytes), at most `limit` long: a view
        of the prefix, not a copy (str(view, "utf-8") decodes it)."""
        pos, end = self.pos, self.end
        if pos + 8 > end:
            raise GgufHeaderIncompleteError(pos + 8, end)
        (n,) = _U64.unpack_from(self.data, pos)
        if n > limit:
            raise refuse(f"has {what} of {n:,} bytes (at most {limit:,})", "length")
        pos += 8
        stop = pos + n
        if stop > end:
            raise GgufHeaderIncompleteError(stop, end)
        self.pos = stop
        return self.data[pos:stop]

    def string(self, what: str) -> str:
        text = str(self.raw(limits.MAX_STRING_BYTES, what), "utf-8", "replace")
        self.keep(len(text))
        return text

    def strings(self, count: int, what: str) -> list[str]:
        """`count` strings in a row, each as `string` reads it (a kept array's elements)."""
        data, pos, end, kept = self.data, self.pos, self.end, self.kept
        limit, most = limits.MAX_STRING_BYTES, limits.MAX_KEPT_BYTES
        unpack = _U64.unpack_from
        texts = []
        for _ in range(count):
            if pos + 8 > end:
                raise GgufHeaderIncompleteError(pos + 8, end)
            (n,) = unpack(data, pos)
            if n > limit:
                raise refuse(f"has {what} of {n:,} bytes (at most {limit:,})", "length")
            pos += 8
            stop = pos + n
            if stop > end:
                raise GgufHeaderIncompleteError(stop, end)
            text = str(data[pos:stop], "utf-8", "replace")
            kept += len(text)
            if kept > most:
                raise _too_much_kept()
            texts.append(text)
            pos = stop
        self.pos, self.kept = pos, kept
        return texts

    def keep(self, n: int) -> None:
        self.kept += n
        if self.kept > limits.MAX_KEPT_BYTES:
            raise _too_much_kept()

    def skip_strings(self, count: int, what: str) -> None:
        # The hot loop of every read (262,144 tokens for the starter model): kept tight.
        data, pos, limit = self.data, self.pos, limits.MAX_STRING_BYTES
        unpack = _U64.unpack_from
        try:
            for _ in range(count):
                (n,) = unpack(data, pos)  # struct.error past the end: fetch more
                if n > limit:
                    raise refuse(f"has {what} of {n:,} bytes (at most {limit:,})", "length")
                pos += 8 + n
        except struct.error:
            self.pos = pos
            self.need(8)
        self.pos = pos
        self.need(0)


def _too_much_kept() -> Exception:
    return refuse(
        f"holds more than {units.size(limits.MAX_KEPT_BYTES, 0, unit='MiB')} of metadata "
        "besides its tokenizer",
        "length",
    )


def _key(cur: _Cursor, index: int, seen: Container[str]) -> str:
    raw = cur.raw(limits.MAX_KEY_BYTES, f"a metadata key (number {index + 1})")
    try:
        key = str(raw, "utf-8")
    except UnicodeDecodeError:
        raise refuse(f"has metadata key number {index + 1} that is not text", "key") from None
    if not key:
        raise refuse(f"has an empty metadata key (number {index + 1})", "key")
    if key in seen:
        raise refuse(f"has the metadata key {shown(key)} twice", "key")
    cur.keep(len(key))
    return key


def _read_value(cur: _Cursor, vtype: int, key: str) -> Any:
    layout = _SCALARS.get(vtype)
    if layout is not None:
        return cur.scalar(layout)
    if vtype == _STRING:
        return cur.string(f"a string of {shown(key)}")
    if vtype == _ARRAY:
        return _read_array(cur, key)
    raise refuse(f"has an unknown value type {vtype} for {shown(key)}", "value-type")


def _read_array(cur: _Cursor, key: str) -> Any:
    etype = cur.scalar(_U32)
    count = cur.scalar(_U64)
    if etype == _ARRAY:
        raise refuse(f"has nested arrays (in {shown(key)}), which llama.cpp refuses", "value-type")
    if etype not in _SCALAR_FORMATS and etype != _STRING:
        raise refuse(f"has an unknown array element type {etype} in {shown(key)}", "value-type")
    if count > limits.MAX_ARRAY_LENGTH:
        raise refuse(
            f"has an array {shown(key)} of {count:,} elements "
            f"(at most {limits.MAX_ARRAY_LENGTH:,})",
            "length",
        )
    size = 8 if etype == _STRING else _SCALARS[etype].size
    cur.need(size * count)  # a count past the bytes left fails here, before any loop
    what = f"a string in {shown(key)}"
    if count > MAX_KEPT_ARRAY:
        if etype == _STRING:
            cur.skip_strings(count, what)
        else:
            cur.pos += size * count
        return ArraySummary(_TYPE_NAMES[etype], count)
    cur.keep(8 * count)
    if etype == _STRING:
        return cur.strings(count, what)
    fmt = _SCALAR_FORMATS[etype]
    values = list(struct.unpack_from(f"<{count}{fmt}", cur.data, cur.pos))
    cur.pos += size * count
    return values


def _check_magic_and_version(data: bytes | memoryview) -> int:
    start = bytes(data[:4])
    if not GGUF_MAGIC.startswith(start) or (len(data) >= 4 and start != GGUF_MAGIC):
        raise NotAGgufError("The file is not a GGUF model (it does not start with 'GGUF').")
    if len(data) < 8:
        raise GgufHeaderIncompleteError(8, len(data))
    (le_version,) = struct.unpack_from("<I", data, 4)
    (be_version,) = struct.unpack_from(">I", data, 4)
    if le_version in (2, 3):
        return int(le_version)
    if be_version in (2, 3):
        raise NotAGgufError(
            "The GGUF file is big-endian; llama.cpp on this machine reads only little-endian "
            "GGUF files.",
            kind="version",
        )
    raise NotAGgufError(
        f"The GGUF file has version {le_version}, which is not supported (only versions 2 and 3).",
        kind="version",
    )


def parse_gguf_header(data: bytes | memoryview, total_size: int | None = None) -> GgufHeader:
    """Parse and validate a GGUF header from the first bytes of a file.

    `total_size` is the whole file's size when known: then a file that ends inside its
    header or before its last tensor's data raises TruncatedGgufError. A prefix too short
    for the header raises GgufHeaderIncompleteError with `bytes_needed`. Anything else wrong
    raises InvalidGgufError (app.models.gguf_validate), one line.
    """
    if total_size is not None and total_size < _PREAMBLE:
        raise NotAGgufError(f"The file is not a GGUF model (it is only {total_size} bytes).")
    try:
        header = _parse(data, total_size)
    except GgufHeaderIncompleteError as error:
        if total_size is not None and error.bytes_needed > total_size:
            raise TruncatedGgufError(
                f"The GGUF file is truncated: it is {total_size:,} bytes "
                "and ends inside its header."
            ) from None
        if error.bytes_needed > MAX_HEADER_BYTES:
            raise refuse(
                f"header is larger than {units.size(MAX_HEADER_BYTES, 0, unit='MiB')}; "
                "it was not read",
                "length",
            ) from None
        raise
    check_header(header)
    return header


def _parse(data: bytes | memoryview, total_size: int | None) -> GgufHeader:
    version = _check_magic_and_version(data)
    cur = _Cursor(data)
    cur.pos = 8
    n_tensors = cur.scalar(_U64)
    n_kv = cur.scalar(_U64)
    for count, cap, what in (
        (n_tensors, limits.MAX_TENSORS, "tensors"),
        (n_kv, limits.MAX_METADATA_KEYS, "metadata keys"),
    ):
        if count > cap:
            raise refuse(f"claims {count:,} {what} (at most {cap:,})", "count")
    metadata: dict[str, Any] = {}
    value_types: dict[str, int] = {}
    for index in range(n_kv):
        key = _key(cur, index, metadata)
        vtype = cur.scalar(_U32)
        metadata[key] = _read_value(cur, vtype, key)
        value_types[key] = vtype
    alignment = _alignment(metadata, value_types)
    tensors = _read_tensors(cur, n_tensors)
    header_bytes = cur.pos
    data_offset = -(-header_bytes // alignment) * alignment
    template = metadata.get("tokenizer.chat_template")
    return GgufHeader(
        version=version,
        metadata=metadata,
        tensors=tensors,
        alignment=alignment,
        data_offset=data_offset,
        header_bytes=header_bytes,
        file_size=total_size,
        chat_template=template if isinstance(template, str) else None,
        value_types=value_types,
    )


def _alignment(metadata: Mapping[str, object], value_types: dict[str, int]) -> int:
    if "general.alignment" not in metadata:
        return DEFAULT_ALIGNMENT
    value = metadata["general.alignment"]
    if value_types["general.alignment"] != limits.GGUF_UINT32 or not isinstance(value, int):
        raise refuse("has a general.alignment that is not a uint32", "value-type")
    if value <= 0 or value & (value - 1):
        raise refuse(f"has alignment {value}, not a power of two", "offset")
    return int(value)


def _read_tensors(cur: _Cursor, n_tensors: int) -> tuple[TensorInfo, ...]:
    """The tensor table: per entry a name (u64 length, bytes), n_dims (u32), the dimensions
    (u64 each), the type (u32) and the offset (u64). Unrolled, as the cursor's reads would be
    (every check, refusal and bytes_needed the same), for the thousands of entries of a big
    model's table."""
    data, end, pos = cur.data, cur.end, cur.pos
    unpack_u64, unpack_u32 = _U64.unpack_from, _U32.unpack_from
    name_limit, max_dims = limits.MAX_TENSOR_NAME_BYTES, limits.MAX_DIMS
    tensors = []
    names: set[str] = set()
    for index in range(n_tensors):
        start = pos + 8
        if start > end:
            raise GgufHeaderIncompleteError(start, end)
        (n,) = unpack_u64(data, pos)
        if n > name_limit:
            raise refuse(
                f"has a tensor name (number {index + 1}) of {n:,} bytes (at most {name_limit:,})",
                "length",
            )
        pos = start + n
        if pos > end:
            raise GgufHeaderIncompleteError(pos, end)
        try:
            name = str(data[start:pos], "utf-8")
        except UnicodeDecodeError:
            raise refuse(
                f"has tensor number {index + 1} whose name is not text", "tensor"
            ) from None
        if not name or name in names:
            what = "an empty name" if not name else f"the name {shown(name)} twice"
            raise refuse(f"has {what} in its tensor table", "tensor")
        names.add(name)
        if pos + 4 > end:
            raise GgufHeaderIncompleteError(pos + 4, end)
        (n_dims,) = unpack_u32(data, pos)
        pos += 4
        if not 1 <= n_dims <= max_dims:
            raise refuse(
                f"gives tensor {shown(name)} {n_dims:,} dimensions "
                f"(llama.cpp reads 1 to {max_dims})",
                "tensor",
            )
        tail = _TENSOR_TAILS[n_dims]
        if pos + tail.size > end:  # the first of the dimensions, type and offset past the end
            dims_end = pos + 8 * n_dims
            needed = next(stop for stop in (dims_end, dims_end + 4, dims_end + 12) if stop > end)
            raise GgufHeaderIncompleteError(needed, end)
        values = tail.unpack_from(data, pos)
        pos += tail.size
        shape, ggml_type = values[:n_dims], values[n_dims]
        _check_tensor(name, shape, ggml_type)
        tensors.append(TensorInfo(name, shape, ggml_type, values[n_dims + 1]))
    cur.pos = pos
    return tuple(tensors)


def _check_tensor(name: str, shape: tuple[int, ...], ggml_type: int) -> None:
    """gguf.cpp's checks of one tensor-table entry: known type, whole blocks per row, and an
    element count and byte size that fit in int64."""
    sizes = TENSOR_TYPE_SIZES.get(ggml_type)
    if sizes is None:
        raise refuse(
            f"gives tensor {shown(name)} unknown type {ggml_type:,} (corrupt, or too new)",
            "tensor",
        )
    n_elements = 1
    for dim in shape:
        n_elements *= dim
        if dim > limits.INT64_MAX or n_elements > limits.INT64_MAX:
            raise refuse(
                f"gives tensor {shown(name)} a shape {list(shape)} whose size overflows", "tensor"
            )
    block_values, block_bytes = sizes
    if shape[0] % block_values:
        raise refuse(
            f"gives tensor {shown(name)} rows of {shape[0]:,} values, not whole blocks of "
            f"{block_values}",
            "tensor",
        )
    if n_elements // block_values * block_bytes > limits.INT64_MAX:
        raise refuse(f"gives tensor {shown(name)} more bytes than a file can hold", "tensor")


def read_gguf_header(path: str | os.PathLike[str]) -> GgufHeader:
    """Read and validate a local GGUF file's header (only its bytes, at most MAX_HEADER_BYTES;
    not again for an unchanged file read recently, recent_headers)."""
    path = Path(path)
    if not path.is_file():
        raise ModelFileMissingError(f"The model file {path} does not exist.")
    return read_through(str(path), lambda: _read_file(path))


def check_gguf(path: Path) -> GgufHeader:
    """read_gguf_header, with a folder named as one (the model path the user gave)."""
    if path.is_dir():
        raise ModelFileMissingError(f"{path} is a folder, not a .gguf model file.")
    return read_gguf_header(path)


def _read_file(path: Path) -> GgufHeader:
    with path.open("rb") as f:
        return read_header_from(f, path.stat().st_size, str(path))


def read_header_from(
    f: IO[bytes], total: int, name: str = "the file", first_read: int = _FIRST_READ
) -> GgufHeader:
    """The validated header of the GGUF file open as `f` (at its start), `total` bytes long:
    reads `first_read` bytes, then only as much more as the header says it needs."""
    data = f.read(min(first_read, total))
    while True:
        try:
            return parse_gguf_header(data, total)
        except GgufHeaderIncompleteError as error:
            want = min(total, max(error.bytes_needed, 2 * len(data)), MAX_HEADER_BYTES)
            more = f.read(want - len(data)) if want > len(data) else b""
            if not more:
                raise TruncatedGgufError(
                    f"The GGUF file is truncated: {name} ends inside its header."
                ) from None
            log.debug(
                "GGUF header of %s needs more than %d bytes; reading %d", name, len(data), want
            )
            data += more
