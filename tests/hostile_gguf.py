"""Hostile GGUF files for the validator's tests: a map of where each field of a real header
lies, byte-level edits on it, and the corpus of hand-made attacks.

    fields = header_fields(data)                  # every count, length, type and value field
    data = set_value(data, "llama.block_count", UINT32, 0)   # re-typed, re-padded, data kept
    for case in corpus(tmp_path): ...             # (name, bytes, what the old reader did)

Edits keep the file a file: the header is rebuilt, padded to its alignment again and the
original tensor data appended, so a case is refused for what it was made to test, not for
an accidental truncation.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path

UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY = range(10)
UINT64, INT64, FLOAT64 = 10, 11, 12
_FORMATS = {
    UINT8: "B",
    INT8: "b",
    UINT16: "H",
    INT16: "h",
    UINT32: "I",
    INT32: "i",
    FLOAT32: "f",
    BOOL: "?",
    UINT64: "Q",
    INT64: "q",
    FLOAT64: "d",
}


@dataclass(frozen=True)
class Field:
    """One field of a header: where it is, how wide, and what it is."""

    name: str  # 'n_tensors', 'kv:<key>:type', 'kv:<key>:value', 'tensor:<name>:dim0', ...
    offset: int
    size: int  # bytes: 1, 2, 4 or 8
    kind: str  # 'count', 'length', 'type', 'int', 'float', 'dims', 'tensor-type', 'offset'


@dataclass(frozen=True)
class Layout:
    fields: tuple[Field, ...]
    header_end: int  # where the tensor table ends
    alignment: int
    keys: dict[str, tuple[int, int]]  # key -> (start of its entry, end of its entry)


def _u(data: bytes, pos: int, fmt: str) -> int:
    return struct.unpack_from("<" + fmt, data, pos)[0]


def header_layout(data: bytes) -> Layout:
    """Walk a valid little-endian GGUF header and list its fields (arrays longer than 64
    elements are walked but their elements not listed)."""
    fields = [Field("version", 4, 4, "int")]
    fields += [Field("n_tensors", 8, 8, "count"), Field("n_kv", 16, 8, "count")]
    n_tensors, n_kv = _u(data, 8, "Q"), _u(data, 16, "Q")
    pos = 24
    keys: dict[str, tuple[int, int]] = {}
    alignment = 32
    for _ in range(n_kv):
        start = pos
        n = _u(data, pos, "Q")
        fields.append(Field(f"kv#{len(keys)}:key-length", pos, 8, "length"))
        key = data[pos + 8 : pos + 8 + n].decode()
        pos += 8 + n
        vtype = _u(data, pos, "I")
        fields.append(Field(f"kv:{key}:type", pos, 4, "type"))
        pos += 4
        pos = _value_fields(data, pos, vtype, key, fields)
        keys[key] = (start, pos)
        if key == "general.alignment":
            alignment = _u(data, pos - 4, "I")
    for _ in range(n_tensors):
        n = _u(data, pos, "Q")
        name = data[pos + 8 : pos + 8 + n].decode()
        fields.append(Field(f"tensor:{name}:name-length", pos, 8, "length"))
        pos += 8 + n
        n_dims = _u(data, pos, "I")
        fields.append(Field(f"tensor:{name}:n_dims", pos, 4, "dims"))
        pos += 4
        for d in range(n_dims):
            fields.append(Field(f"tensor:{name}:dim{d}", pos, 8, "dims"))
            pos += 8
        fields.append(Field(f"tensor:{name}:type", pos, 4, "tensor-type"))
        fields.append(Field(f"tensor:{name}:offset", pos + 4, 8, "offset"))
        pos += 12
    return Layout(tuple(fields), pos, alignment, keys)


def _value_fields(data: bytes, pos: int, vtype: int, key: str, fields: list[Field]) -> int:
    if vtype in _FORMATS:
        size = struct.calcsize(_FORMATS[vtype])
        kind = "float" if vtype in (FLOAT32, FLOAT64) else "int"
        fields.append(Field(f"kv:{key}:value", pos, size, kind))
        return pos + size
    if vtype == STRING:
        fields.append(Field(f"kv:{key}:length", pos, 8, "length"))
        return pos + 8 + _u(data, pos, "Q")
    etype, count = _u(data, pos, "I"), _u(data, pos + 4, "Q")
    fields.append(Field(f"kv:{key}:element-type", pos, 4, "type"))
    fields.append(Field(f"kv:{key}:count", pos + 4, 8, "count"))
    pos += 12
    if etype == STRING:
        for i in range(count):
            if i < 64:
                fields.append(Field(f"kv:{key}[{i}]:length", pos, 8, "length"))
            pos += 8 + _u(data, pos, "Q")
        return pos
    size = struct.calcsize(_FORMATS[etype])
    if count <= 64:
        kind = "float" if etype in (FLOAT32, FLOAT64) else "int"
        for i in range(count):
            fields.append(Field(f"kv:{key}[{i}]", pos + i * size, size, kind))
    return pos + size * count


def field(data: bytes, name: str) -> Field:
    return next(f for f in header_layout(data).fields if f.name == name)


def put(data: bytes, name: str, value: int) -> bytes:
    """`data` with the fixed-size field `name` overwritten (value wrapped to its width)."""
    f = field(data, name)
    out = bytearray(data)
    out[f.offset : f.offset + f.size] = (value % 2 ** (8 * f.size)).to_bytes(f.size, "little")
    return bytes(out)


def encode_value(vtype: int, value: object, element_type: int | None = None) -> bytes:
    """A metadata value's bytes: its type, then the value (arrays: element type, count)."""
    out = struct.pack("<I", vtype)
    if vtype == ARRAY:
        assert isinstance(value, list) and element_type is not None
        out += struct.pack("<IQ", element_type, len(value))
        return out + b"".join(encode_value(element_type, v)[4:] for v in value)
    if vtype == STRING:
        raw = value.encode() if isinstance(value, str) else bytes(value)  # type: ignore[call-overload]  # bytes-like, from the caller
        return out + struct.pack("<Q", len(raw)) + raw
    return out + struct.pack("<" + _FORMATS[vtype], value)


def _rebuild(data: bytes, header: bytes, layout: Layout) -> bytes:
    """`header` (the bytes up to the end of the tensor table), padded to the alignment,
    followed by the original file's tensor data."""
    old_start = -(-layout.header_end // layout.alignment) * layout.alignment
    tensor_data = data[old_start:] if old_start < len(data) else b""
    padding = (-len(header)) % layout.alignment if tensor_data else 0
    return header + b"\0" * padding + tensor_data


def set_value(
    data: bytes, key: str, vtype: int, value: object, element_type: int | None = None
) -> bytes:
    """`data` with metadata `key` set to `value` of GGUF type `vtype` (added when absent)."""
    layout = header_layout(data)
    raw_key = key.encode()
    entry = struct.pack("<Q", len(raw_key)) + raw_key + encode_value(vtype, value, element_type)
    if key in layout.keys:
        start, end = layout.keys[key]
        header = data[:start] + entry + data[end : layout.header_end]
    else:  # a new entry after the last one
        end = max(span[1] for span in layout.keys.values())
        n_kv = _u(data, 16, "Q") + 1
        header = data[:16] + struct.pack("<Q", n_kv) + data[24:end] + entry
        header += data[end : layout.header_end]
    return _rebuild(data, header, layout)


def drop_key(data: bytes, key: str) -> bytes:
    layout = header_layout(data)
    start, end = layout.keys[key]
    n_kv = _u(data, 16, "Q") - 1
    header = data[:16] + struct.pack("<Q", n_kv) + data[24:start] + data[end : layout.header_end]
    return _rebuild(data, header, layout)


def header_bytes(path: Path) -> tuple[bytes, int]:
    """The header of the GGUF at `path` (up to its data section) and the file's size, read
    without reading the tensor data."""
    from app.models.gguf_read import read_gguf_header

    header = read_gguf_header(path)
    with path.open("rb") as f:
        return f.read(header.data_offset), path.stat().st_size


def trimmed_vocab(data: bytes, keep: int) -> bytes:
    """A real header with its tokenizer arrays cut to `keep` entries (token ids in the
    metadata stay below it): the starter model's keys and tensor table, parsed in a few ms."""
    out = data
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
        layout = header_layout(out)
        if key not in layout.keys:
            continue
        start, end = layout.keys[key]
        key_len = _u(out, start, "Q")
        at = start + 8 + key_len + 4  # element type, count, elements
        etype = _u(out, at, "I")
        pos = at + 12
        if etype == STRING:
            for _ in range(keep):
                pos += 8 + _u(out, pos, "Q")
        else:
            pos += keep * struct.calcsize(_FORMATS[etype])
        entry = out[start:at] + struct.pack("<IQ", etype, keep) + out[at + 12 : pos]
        out = _rebuild(out, out[:start] + entry + out[end : layout.header_end], layout)
    return out


NAN, INF = math.nan, math.inf


# ---- the hand-made corpus -----------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One hostile file: its bytes, the class of check meant to refuse it, and what the
    reader before the validator did with it (measured once against that reader; see
    docs/reliability.md): 'crash', 'hang', 'allocate', 'abort' (llama.cpp's GGML_ASSERT
    ends the engine), 'accepted' (wrong numbers reached fit and load) or 'refused'."""

    name: str
    data: bytes
    kind: str
    used_to: str = "refused"


# What the reader before the validator (and the fit arithmetic after it) did with each case
# that it did not refuse, measured once with that reader: a crash (the exception), a hang (over
# 5 s), or acceptance, after which llama.cpp either aborts the engine (GGML_ASSERT in
# load_hparams: 'abort') or is handed numbers the app then computes with ('accepted').
_CRASH = {
    "block_count NaN": "ValueError",
    "block_count as list": "TypeError",
    "context_length NaN": "ValueError",
    "context_length inf": "OverflowError",
    "head_count_kv NaN": "ValueError",
    "key_length -inf": "OverflowError",
    "alignment NaN": "ValueError",
    "block_count 4294967295": "MemoryError",
    "head_count_kv array shorter than block count": "IndexError",
    "head_count_kv array of 0 for 3 blocks": "IndexError",
    "head_count_kv array of 5000": "TypeError",
    "head_count_kv array with NaN": "ValueError",
}
_ABORT = (
    "block_count 0",
    "block_count 513",
    "rope scaling type 'bogus'",
    "expert_count 2000",
    "experts used without experts",
    "nextn layers beyond block count",
)
_ACCEPTED = (
    "block_count as text",
    "block_count as float",
    "context_length as text",
    "context_length as list",
    "embedding_length as text",
    "head_count as text",
    "key_length as text",
    "rms epsilon NaN",
    "rope base inf",
    "rope base as text",
    "alignment 0",
    "alignment 3",
    "alignment as text",
    "alignment as uint64",
    "architecture missing",
    "architecture as number",
    "architecture with a newline",
    "chat template as number",
    "tokens as numbers",
    "block_count 1 with 2 blocks of tensors",
    "block_count 3 with 2 blocks of tensors",
    "context_length 0",
    "context_length 2**32",
    "context_length 2**63-1",
    "embedding_length 0",
    "head_count 2**31",
    "head_count_kv 2**32-1",
    "file_type 999",
    "file_type 4 (removed)",
    "parameter_count NaN",
    "head_count_kv array longer than block count",
    "head_count_kv array of text",
    "head_count array shorter than block count",
    "feed_forward array shorter than block count",
    "head_count_kv says 4, tensors hold 2",
    "key_length says 32, tensors hold 64",
    "sliding window pattern of 600 flags",
    "sliding window pattern as text",
    "rows not whole blocks",
    "overlapping tensors",
    "misaligned tensor",
    "duplicate tensor name",
)
USED_TO: dict[str, str] = (
    {name: f"crash ({error})" for name, error in _CRASH.items()}
    | {name: "abort" for name in _ABORT}
    | {name: "accepted" for name in _ACCEPTED}
    | {"block_count 1000000": "hang"}
)


def base_files(folder: Path) -> dict[str, bytes]:
    """The factory files the corpus edits: a tiny llama and a gemma3 with sliding windows
    and per-layer KV heads."""
    from tests.gguf_factory import write_tiny_gguf

    llama = write_tiny_gguf(folder / "base-llama.gguf", n_layer=2, n_head=4, n_head_kv=2)
    gemma = write_tiny_gguf(
        folder / "base-gemma3.gguf",
        arch="gemma3",
        n_layer=3,
        n_head=4,
        n_head_kv=[2, 1, 2],
        sliding_window=256,
    )
    return {"llama": llama.read_bytes(), "gemma3": gemma.read_bytes()}


def corpus(folder: Path) -> list[Case]:
    """Every hand-made attack, built from the factory files with byte-level edits."""
    bases = base_files(folder)
    ll, gm = bases["llama"], bases["gemma3"]
    layout = header_layout(ll)
    cases: list[Case] = []

    def add(name: str, data: bytes, kind: str) -> None:
        cases.append(Case(name, data, kind, USED_TO.get(name, "refused")))

    # Truncated at many offsets: inside the preamble, a key, a value, the tensor table, data.
    cuts = sorted({0, 1, 3, 4, 7, 8, 15, 16, 23, 24, 25, 40, 100, 333, 1000, 4096})
    cuts += [layout.header_end - 1, layout.header_end, layout.header_end + 7, len(ll) - 1]
    cuts += [layout.header_end * k // 16 for k in range(1, 16)]
    for cut in sorted(set(cuts)):
        kind = "magic" if cut < 4 or cut < 24 else "truncated"
        add(f"truncated at byte {cut}", ll[:cut], kind)
    for magic in (b"GGUG", b"gguf", b"\0\0\0\0", b"PK\x03\x04", b"FUGG"):
        add(f"magic {magic!r}", magic + ll[4:], "magic")
    for version in (0, 1, 4, 99, 2**32 - 1):
        add(f"version {version}", put(ll, "version", version), "version")
    add("big-endian version", put(ll, "version", 3 << 24), "version")

    # Absurd counts and lengths.
    for what in ("n_tensors", "n_kv"):
        for value in (2**63 - 1, 2**32, 2**64 - 1, 70_000):
            add(f"{what} = {value}", put(ll, what, value), "count")
        add(
            f"{what} + 1",
            put(ll, what, _u(ll, 8 if what == "n_tensors" else 16, "Q") + 1),
            "length" if what == "n_kv" else "tensor",
        )
    for value in (2**63 - 1, 2**32, 2**40, 70_000):
        add(f"key length {value}", put(ll, "kv#0:key-length", value), "length")
        add(f"general.name length {value}", put(ll, "kv:general.name:length", value), "length")
        add(f"token count {value}", put(ll, "kv:tokenizer.ggml.tokens:count", value), "length")
        add(f"token length {value}", put(ll, "kv:tokenizer.ggml.tokens[5]:length", value), "length")
        add(
            f"tensor name length {value}",
            put(ll, "tensor:token_embd.weight:name-length", value),
            "length",
        )
    add("empty key", put(ll, "kv#0:key-length", 0), "key")
    add("tensor name of 64 bytes", put(ll, "tensor:token_embd.weight:name-length", 64), "length")
    add("empty tensor name", put(ll, "tensor:token_embd.weight:name-length", 0), "tensor")

    # Wrong types.
    for value in (13, 2**31, 2**32 - 1):
        add(f"value type {value}", put(ll, "kv:general.name:type", value), "value-type")
        add(
            f"array element type {value}",
            put(ll, "kv:tokenizer.ggml.tokens:element-type", value),
            "value-type",
        )
    add("nested array", put(ll, "kv:tokenizer.ggml.tokens:element-type", ARRAY), "value-type")
    arch = "llama."
    wrong: list[tuple[str, str, int, object]] = [
        ("block_count as text", "block_count", STRING, "2"),
        ("block_count as float", "block_count", FLOAT32, 2.0),
        ("block_count NaN", "block_count", FLOAT32, NAN),
        ("block_count as list", "block_count", ARRAY, [2, 2]),
        ("context_length NaN", "context_length", FLOAT64, NAN),
        ("context_length inf", "context_length", FLOAT32, INF),
        ("context_length as text", "context_length", STRING, "4096"),
        ("context_length as list", "context_length", ARRAY, [4096]),
        ("embedding_length as text", "embedding_length", STRING, "128"),
        ("head_count as text", "attention.head_count", STRING, "4"),
        ("head_count_kv NaN", "attention.head_count_kv", FLOAT32, NAN),
        ("key_length as text", "attention.key_length", STRING, "64"),
        ("key_length -inf", "attention.key_length", FLOAT32, -INF),
        ("rms epsilon NaN", "attention.layer_norm_rms_epsilon", FLOAT32, NAN),
        ("rope base inf", "rope.freq_base", FLOAT32, INF),
        ("rope base as text", "rope.freq_base", STRING, "1e4"),
    ]
    for name, key, vtype, wrong_value in wrong:
        element = UINT32 if vtype == ARRAY else None
        # NaN/inf in a float key is out of range; in a whole-number key it is the wrong type.
        float_key = key in ("attention.layer_norm_rms_epsilon", "rope.freq_base")
        kind = "value-range" if float_key and vtype != STRING else "value-type"
        add(name, set_value(ll, arch + key, vtype, wrong_value, element), kind)
    add("alignment 0", set_value(ll, "general.alignment", UINT32, 0), "offset")
    add("alignment 3", set_value(ll, "general.alignment", UINT32, 3), "offset")
    add("alignment as text", set_value(ll, "general.alignment", STRING, "32"), "value-type")
    add("alignment as uint64", set_value(ll, "general.alignment", UINT64, 32), "value-type")
    add("alignment NaN", set_value(ll, "general.alignment", FLOAT32, NAN), "value-type")
    add("architecture missing", drop_key(ll, "general.architecture"), "value-type")
    add("architecture as number", set_value(ll, "general.architecture", UINT32, 7), "value-type")
    add(
        "architecture with a newline",
        set_value(ll, "general.architecture", STRING, "lla\nma"),
        "value-range",
    )
    add(
        "chat template as number", set_value(ll, "tokenizer.chat_template", UINT32, 1), "value-type"
    )
    add(
        "tokens as numbers",
        set_value(ll, "tokenizer.ggml.tokens", ARRAY, [1, 2, 3], UINT32),
        "value-type",
    )

    # Out-of-range values.
    for value in (0, 513, 10**6, 2**32 - 1):
        add(
            f"block_count {value}",
            set_value(ll, arch + "block_count", UINT32, value),
            "value-range",
        )
    add(
        "block_count 1 with 2 blocks of tensors",
        set_value(ll, arch + "block_count", UINT32, 1),
        "layout",
    )
    add(
        "block_count 3 with 2 blocks of tensors",
        set_value(ll, arch + "block_count", UINT32, 3),
        "layout",
    )
    add("context_length 0", set_value(ll, arch + "context_length", UINT32, 0), "value-range")
    add(
        "context_length 2**32", set_value(ll, arch + "context_length", UINT64, 2**32), "value-range"
    )
    add(
        "context_length 2**63-1",
        set_value(ll, arch + "context_length", UINT64, 2**63 - 1),
        "value-range",
    )
    add("embedding_length 0", set_value(ll, arch + "embedding_length", UINT32, 0), "value-range")
    add(
        "head_count 2**31",
        set_value(ll, arch + "attention.head_count", UINT32, 2**31),
        "value-range",
    )
    add(
        "head_count_kv 2**32-1",
        set_value(ll, arch + "attention.head_count_kv", UINT32, 2**32 - 1),
        "value-range",
    )
    add(
        "key_length 2**32-1",
        set_value(ll, arch + "attention.key_length", UINT32, 2**32 - 1),
        "value-range",
    )
    add("file_type 999", set_value(ll, "general.file_type", UINT32, 999), "value-range")
    add("file_type 4 (removed)", set_value(ll, "general.file_type", UINT32, 4), "value-range")
    add(
        "rope scaling type 'bogus'",
        set_value(ll, arch + "rope.scaling.type", STRING, "bogus"),
        "value-range",
    )
    add("expert_count 2000", set_value(ll, arch + "expert_count", UINT32, 2000), "value-range")
    add(
        "experts used without experts",
        set_value(ll, arch + "expert_used_count", UINT32, 2),
        "value-range",
    )
    add(
        "nextn layers beyond block count",
        set_value(ll, arch + "nextn_predict_layers", UINT32, 5),
        "value-range",
    )
    add("parameter_count NaN", set_value(ll, "general.parameter_count", FLOAT64, NAN), "value-type")

    # Per-layer arrays and head sizes against the tensors present.
    g = "gemma3."
    kv = g + "attention.head_count_kv"
    add(
        "head_count_kv array shorter than block count",
        set_value(gm, kv, ARRAY, [2], INT32),
        "layout",
    )
    add("head_count_kv array of 0 for 3 blocks", set_value(gm, kv, ARRAY, [], INT32), "layout")
    add(
        "head_count_kv array longer than block count",
        set_value(gm, kv, ARRAY, [2, 1, 2, 2], INT32),
        "layout",
    )
    add("head_count_kv array of 5000", set_value(gm, kv, ARRAY, [1] * 5000, INT32), "layout")
    add(
        "head_count_kv array of text",
        set_value(gm, kv, ARRAY, ["2", "1", "2"], STRING),
        "value-type",
    )
    add(
        "head_count_kv array with NaN",
        set_value(gm, kv, ARRAY, [2.0, NAN, 2.0], FLOAT32),
        "value-type",
    )
    add(
        "head_count array shorter than block count",
        set_value(gm, g + "attention.head_count", ARRAY, [4, 4], UINT32),
        "layout",
    )
    add(
        "feed_forward array shorter than block count",
        set_value(gm, g + "feed_forward_length", ARRAY, [256], UINT32),
        "layout",
    )
    add(
        "head_count_kv says 4, tensors hold 2",
        set_value(ll, arch + "attention.head_count_kv", UINT32, 4),
        "layout",
    )
    add(
        "key_length says 32, tensors hold 64",
        set_value(ll, arch + "attention.key_length", UINT32, 32),
        "layout",
    )
    add(
        "sliding window pattern of 600 flags",
        set_value(gm, g + "attention.sliding_window_pattern", ARRAY, [True] * 600, BOOL),
        "value-type",
    )
    add(
        "sliding window pattern as text",
        set_value(gm, g + "attention.sliding_window_pattern", STRING, "6"),
        "value-type",
    )

    # The tensor table.
    t0, t1 = "token_embd.weight", "output_norm.weight"
    for value in (0, 5, 2**32 - 1):
        add(f"n_dims {value}", put(ll, f"tensor:{t0}:n_dims", value), "tensor")
    add("dimension 2**63", put(ll, f"tensor:{t0}:dim0", 2**63), "tensor")
    add("dimension 2**64-1", put(ll, f"tensor:{t0}:dim1", 2**64 - 1), "tensor")
    add(
        "element count overflows int64",
        put(put(ll, f"tensor:{t0}:dim0", 2**40), f"tensor:{t0}:dim1", 2**30),
        "tensor",
    )
    add(
        "byte size overflows",
        put(put(ll, f"tensor:{t1}:dim0", 2**62), f"tensor:{t1}:type", 0),
        "tensor",
    )
    for value in (4, 31, 43, 2**32 - 1):
        add(f"tensor type {value}", put(ll, f"tensor:{t0}:type", value), "tensor")
    add("rows not whole blocks", put(ll, f"tensor:{t1}:type", 12), "tensor")
    add("tensor offset past the file", put(ll, f"tensor:{t1}:offset", 2**40), "offset")
    add("tensor offset 2**64-1", put(ll, f"tensor:{t1}:offset", 2**64 - 1), "offset")
    add("overlapping tensors", put(ll, f"tensor:{t1}:offset", 0), "offset")
    add(
        "misaligned tensor",
        put(ll, f"tensor:{t1}:offset", _u(ll, field(ll, f"tensor:{t1}:offset").offset, "Q") + 1),
        "offset",
    )
    dup = put(ll, f"tensor:{t1}:name-length", len(t0))
    dup_field = field(ll, f"tensor:{t1}:name-length")
    dup = dup[: dup_field.offset + 8] + t0.encode() + ll[dup_field.offset + 8 + len(t1) :]
    add(
        "duplicate tensor name",
        _rebuild(ll, dup[: layout.header_end - len(t1) + len(t0)], layout),
        "tensor",
    )
    return cases


_SEVERITY = ("hang", "crash", "abort", "accepted")


def nastiest(cases: list[Case], n: int = 100) -> list[Case]:
    """The `n` cases that did the most harm before the validator: hangs, crashes, llama.cpp
    aborts, silently accepted nonsense, then the refused ones in corpus order (absurd
    counts and lengths first among them)."""

    def rank(case: Case) -> tuple[int, int]:
        severity = next(
            (i for i, s in enumerate(_SEVERITY) if case.used_to.startswith(s)), len(_SEVERITY)
        )
        absurd = (
            0 if any(w in case.name for w in ("2**", "9223372036854775807", "4294967296")) else 1
        )
        return severity, absurd

    return sorted(cases, key=rank)[:n]
