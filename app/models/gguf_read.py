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

# GGUF value type ids (gguf spec) -> struct format of one scalar.
_SCALAR_FORMATS = dict(zip((0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12), "BbHhIif?Qqd", strict=True))
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

    def scalar(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        self.need(size)
        (value,) = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += size
        return value

    def raw(self, limit: int, what: str) -> bytes:
        """A GGUF string's bytes (u64 length, then the bytes), at most `limit` long."""
        n = self.scalar("Q")
        if n > limit:
            raise refuse(f"has {what} of {n:,} bytes (at most {limit:,})", "length")
        self.need(n)
        raw = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return raw

    def string(self, what: str) -> str:
        text = self.raw(limits.MAX_STRING_BYTES, what).decode("utf-8", errors="replace")
        self.keep(len(text))
        return text

    def keep(self, n: int) -> None:
        self.kept += n
        if self.kept > limits.MAX_KEPT_BYTES:
            raise refuse(
                f"holds more than {units.size(limits.MAX_KEPT_BYTES, 0, unit='MiB')} of metadata "
                "besides its tokenizer",
                "length",
            )

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


_U64 = struct.Struct("<Q")


def _key(cur: _Cursor, index: int, seen: Container[str]) -> str:
    raw = cur.raw(limits.MAX_KEY_BYTES, f"a metadata key (number {index + 1})")
    try:
        key = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise refuse(f"has metadata key number {index + 1} that is not text", "key") from None
    if not key:
        raise refuse(f"has an empty metadata key (number {index + 1})", "key")
    if key in seen:
        raise refuse(f"has the metadata key {shown(key)} twice", "key")
    cur.keep(len(key))
    return key


def _read_value(cur: _Cursor, vtype: int, key: str) -> Any:
    if vtype in _SCALAR_FORMATS:
        return cur.scalar(_SCALAR_FORMATS[vtype])
    if vtype == _STRING:
        return cur.string(f"a string of {shown(key)}")
    if vtype == _ARRAY:
        return _read_array(cur, key)
    raise refuse(f"has an unknown value type {vtype} for {shown(key)}", "value-type")


def _read_array(cur: _Cursor, key: str) -> Any:
    etype = cur.scalar("I")
    count = cur.scalar("Q")
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
    size = 8 if etype == _STRING else struct.calcsize(_SCALAR_FORMATS[etype])
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
        return [cur.string(what) for _ in range(count)]
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
    n_tensors = cur.scalar("Q")
    n_kv = cur.scalar("Q")
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
        vtype = cur.scalar("I")
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
    tensors = []
    names: set[str] = set()
    for index in range(n_tensors):
        raw = cur.raw(limits.MAX_TENSOR_NAME_BYTES, f"a tensor name (number {index + 1})")
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise refuse(
                f"has tensor number {index + 1} whose name is not text", "tensor"
            ) from None
        if not name or name in names:
            what = "an empty name" if not name else f"the name {shown(name)} twice"
            raise refuse(f"has {what} in its tensor table", "tensor")
        names.add(name)
        n_dims = cur.scalar("I")
        if not 1 <= n_dims <= limits.MAX_DIMS:
            raise refuse(
                f"gives tensor {shown(name)} {n_dims:,} dimensions "
                f"(llama.cpp reads 1 to {limits.MAX_DIMS})",
                "tensor",
            )
        cur.need(8 * n_dims)
        shape = struct.unpack_from(f"<{n_dims}Q", cur.data, cur.pos)
        cur.pos += 8 * n_dims
        ggml_type = cur.scalar("I")
        offset = cur.scalar("Q")
        _check_tensor(name, shape, ggml_type)
        tensors.append(TensorInfo(name, tuple(int(d) for d in shape), ggml_type, int(offset)))
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
