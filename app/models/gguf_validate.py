"""Refuse a GGUF whose header must not reach llama.cpp (or this app's arithmetic).

Every header the app reads goes through app.models.gguf_read.parse_gguf_header (local files,
the starter package, the Hub's range reads), which parses within the caps below and then
calls `check_header`. A file that fails raises InvalidGgufError (or its NotAGgufError /
TruncatedGgufError) with one line saying why; the engine is never asked to load it.

The caps keep a hostile header from costing more than its own bytes (at most
MAX_HEADER_BYTES, the same cap as the Hub read) plus a few MiB of parsed values, and from
looping longer than its bytes allow. `check_header` then checks what the bytes mean:
- every tensor's data where llama.cpp's gguf reader expects it (gguf.cpp: in order, each at
  the aligned end of the one before), so nothing overlaps, inside the file, and on the 32-byte
  boundary ggml's CPU backend needs;
- the metadata values that the app or llama.cpp reads (llama-model.cpp load_hparams) against
  their type and a sane range: no NaN/inf, no strings or lists where numbers belong, the
  block count within llama.cpp's LLAMA_MAX_LAYERS and the expert counts within what its
  GGML_ASSERTs allow (those abort the process rather than fail the load), a known file type
  and rope scaling type;
- the tokenizer against the model (app.models.gguf_tokenizer): one llama.cpp would abort or
  loop on, a repeated token;
- the shapes the metadata promises against the tensors present: per-layer arrays one value per
  block, `blk.N` tensors for exactly the blocks declared, K/V projections as wide as the KV
  heads times the head size.

Limits from the vendored llama.cpp (llama-cpp-python 0.3.36): LLAMA_MAX_LAYERS 512 and
LLAMA_MAX_EXPERTS 1024 (src/llama-hparams.h), GGML_MAX_DIMS 4 and GGML_MAX_NAME 64
(ggml/include/ggml.h).
"""

from __future__ import annotations

import math
import re

from app.models.gguf_header import NOT_PLAIN_KV, GgufHeader
from app.models.gguf_tokenizer import check_tokenizer
from app.platform.errors import InvalidGgufError, TruncatedGgufError

MIB = 1024 * 1024

# ---- the reader's caps (app.models.gguf_header reads within these) ----------------------------
MAX_HEADER_BYTES = 96 * MIB  # the whole header; the Hub read has the same cap
MAX_METADATA_KEYS = 65_536  # real models have 20 to 60
MAX_TENSORS = 65_536  # LLAMA_MAX_LAYERS x ~30 tensors per block is ~15,000
MAX_KEY_BYTES = 65_535  # the GGUF spec's limit for a key
MAX_STRING_BYTES = 1 * MIB  # one metadata string: a chat template, a token, a merge
MAX_ARRAY_LENGTH = 4 * MIB  # elements: 16x the largest tokenizer vocabularies
MAX_KEPT_BYTES = 8 * MIB  # decoded values kept (strings, arrays up to MAX_KEPT_ARRAY)
MAX_TENSOR_NAME_BYTES = 63  # GGML_MAX_NAME - 1
MAX_DIMS = 4  # GGML_MAX_DIMS
INT64_MAX = 2**63 - 1  # ggml keeps dimensions, element counts and sizes in int64/size_t

# ---- llama.cpp's limits and sane ranges for what the metadata says ---------------------------
LLAMA_MAX_LAYERS = 512
LLAMA_MAX_EXPERTS = 1024
MAX_CONTEXT_LENGTH = 2**32 - 1  # tokens: llama.cpp keeps n_ctx_train in a uint32
MAX_EMBEDDING_LENGTH = 2**20
MAX_FEED_FORWARD_LENGTH = 2**24
MAX_HEADS = 2**14
MAX_HEAD_SIZE = 2**16
MAX_PARAMETER_COUNT = 2**53
GGUF_UINT32 = 4  # the value type general.alignment must have (gguf.cpp refuses others)
# ggml's TENSOR_ALIGNMENT: a mapped file's tensor data must start on it, or the CPU backend
# aborts (GGML_ASSERT "buffer pointer must be aligned", ggml-backend.cpp); general.alignment
# 1 to 16 puts it off that boundary.
CPU_TENSOR_ALIGNMENT = 32

# llama.cpp's llama_ftype values (include/llama.h), without the removed 4-6 and 33-35.
KNOWN_FILE_TYPES = frozenset({*range(0, 4), *range(7, 33), *range(36, 42)})
ROPE_SCALING_TYPES = ("none", "linear", "yarn", "longrope")  # others: GGML_ASSERT abort

_BLOCK_TENSOR = re.compile(r"blk\.(\d{1,9})\.")
_ARCH_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def shown(text: str, limit: int = 48) -> str:
    """`text` from the file, safe in a one-line message: quoted, non-printables escaped,
    cut at `limit` characters."""
    safe = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[: limit + 1])
    return f"'{safe[:limit]}…'" if len(safe) > limit else f"'{safe}'"


def refuse(message: str, kind: str) -> InvalidGgufError:
    return InvalidGgufError(f"The GGUF file {message}.", kind=kind)


def check_header(header: GgufHeader) -> None:
    """Raise InvalidGgufError (one line, `.kind` the class of check) unless `header` is safe
    to compute with and to hand to llama.cpp. See the module docstring for what is checked."""
    _check_placement(header)
    arch = _check_architecture(header)
    n_layer = _check_hparams(header, arch)
    _check_expert_counts(header, arch, n_layer)
    _check_floats(header, arch)
    check_tokenizer(header)
    if header.tensors and n_layer:
        _check_blocks_present(header, n_layer)
        _check_kv_widths(header, arch, n_layer)


# ---- tensor data --------------------------------------------------------------------------


def _check_placement(header: GgufHeader) -> None:
    expected = 0
    align = header.alignment
    for tensor in header.tensors:
        if tensor.offset < expected:
            raise refuse(
                f"has overlapping tensors: {shown(tensor.name)} starts at {tensor.offset:,}, "
                f"inside the tensor before it (which ends at {expected:,})",
                "offset",
            )
        if tensor.offset != expected:
            raise refuse(
                f"puts tensor {shown(tensor.name)} at offset {tensor.offset:,}; llama.cpp "
                f"expects it at {expected:,} (tensors follow each other, {align}-byte aligned)",
                "offset",
            )
        start = header.data_offset + tensor.offset
        if start % CPU_TENSOR_ALIGNMENT:
            raise refuse(
                f"puts tensor {shown(tensor.name)} at byte {start:,}, off the "
                f"{CPU_TENSOR_ALIGNMENT}-byte boundary llama.cpp needs (general.alignment "
                f"{align}); llama.cpp would stop the engine on it",
                "offset",
            )
        expected = tensor.offset + -(-tensor.n_bytes // align) * align
    total = header.file_size
    if total is not None and total < header.data_end:
        raise TruncatedGgufError(
            f"The GGUF file is truncated: it is {total:,} bytes but its tensors "
            f"need {header.data_end:,}."
        )


# ---- metadata -----------------------------------------------------------------------------


def _check_architecture(header: GgufHeader) -> str | None:
    value = header.metadata.get("general.architecture")
    if value is None:
        if header.tensors:
            raise refuse("names no architecture (general.architecture)", "value-type")
        return None
    if not isinstance(value, str):
        raise refuse("has a general.architecture that is not text", "value-type")
    if not _ARCH_NAME.fullmatch(value):
        raise refuse(f"names an impossible architecture {shown(value)}", "value-range")
    return value


def _integer(
    header: GgufHeader, key: str, low: int, high: int, *, per_layer: int | None = None
) -> int | list[int] | None:
    """The integer (or, with `per_layer`, the one-per-block list) stored under `key`,
    checked for type and range; None when the key is absent."""
    value = header.metadata.get(key)
    if value is None:
        return None
    if isinstance(value, list) or not _is_scalar(value):
        if per_layer is None:
            raise refuse(f"has a list where the number {key} belongs", "value-type")
        if not isinstance(value, list):  # an ArraySummary: longer than any block count
            raise refuse(f"has a {key} list far longer than its block count", "layout")
        if len(value) != per_layer:
            raise refuse(
                f"has {len(value)} values of {key} for {per_layer} blocks (one per block)",
                "layout",
            )
        return [_in_range(key, item, low, high) for item in value]
    return _in_range(key, value, low, high)


def _is_scalar(value: object) -> bool:
    return isinstance(value, (int, float, str, bool))


def _in_range(key: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        what = "text" if isinstance(value, str) else type(value).__name__
        if isinstance(value, float):
            what = "a non-number" if math.isnan(value) else f"the float {value!r}"
        raise refuse(f"has {what} where the whole number {key} belongs", "value-type")
    if not low <= value <= high:
        raise refuse(f"has {key} = {value:,}, outside {low:,} to {high:,}", "value-range")
    return value


def _check_hparams(header: GgufHeader, arch: str | None) -> int:
    """The block count (0 when the file has no architecture keys to check)."""
    get = header.metadata.get
    _in_or_absent(header, "general.file_type", KNOWN_FILE_TYPES, "a file type llama.cpp knows")
    _integer(header, "general.parameter_count", 0, MAX_PARAMETER_COUNT)
    name = get("general.name")
    if name is not None and not isinstance(name, str):
        raise refuse("has a general.name that is not text", "value-type")
    template = get("tokenizer.chat_template")
    if template is not None and not isinstance(template, str):
        raise refuse("has a chat template (tokenizer.chat_template) that is not text", "value-type")
    tokens = get("tokenizer.ggml.tokens")
    if tokens is not None and not _is_string_array(tokens):
        raise refuse("has tokenizer.ggml.tokens that is not a list of strings", "value-type")
    if arch is None:
        return 0
    a = f"{arch}."
    required = bool(header.tensors)  # vocab-only and metadata-only files: llama.cpp skips them
    n_layer = _integer(header, a + "block_count", 1, LLAMA_MAX_LAYERS)
    if isinstance(n_layer, int):
        pass
    elif required:
        raise refuse(f"has no block count ({a}block_count); llama.cpp needs one", "value-type")
    else:
        n_layer = 0
    if _integer(header, a + "context_length", 1, MAX_CONTEXT_LENGTH) is None and required:
        raise refuse(f"has no trained context length ({a}context_length)", "value-type")
    if _integer(header, a + "embedding_length", 1, MAX_EMBEDDING_LENGTH) is None and required:
        raise refuse(f"has no embedding length ({a}embedding_length)", "value-type")
    layers = n_layer or None
    _integer(header, a + "feed_forward_length", 0, MAX_FEED_FORWARD_LENGTH, per_layer=layers)
    _integer(header, a + "attention.head_count", 0, MAX_HEADS, per_layer=layers)
    _integer(header, a + "attention.head_count_kv", 0, MAX_HEADS, per_layer=layers)
    for key in ("key_length", "value_length", "key_length_swa", "value_length_swa"):
        _integer(header, f"{a}attention.{key}", 0, MAX_HEAD_SIZE)
    _integer(header, a + "attention.sliding_window", 0, MAX_CONTEXT_LENGTH)
    _integer(header, a + "vocab_size", 0, MAX_ARRAY_LENGTH)
    _integer(header, a + "rope.dimension_count", 0, MAX_HEAD_SIZE)
    _check_swa_pattern(header, a + "attention.sliding_window_pattern")
    # GGML_ASSERTs in load_hparams: these abort the engine instead of failing the load.
    for key in ("nextn_predict_layers", "posnet.block_count", "convnext.block_count"):
        _integer(header, a + key, 0, n_layer)
    scaling = get(a + "rope.scaling.type")
    if scaling is not None and scaling not in ROPE_SCALING_TYPES:
        raise refuse(
            f"has rope scaling type {shown(str(scaling))} (llama.cpp knows "
            f"{', '.join(ROPE_SCALING_TYPES)})",
            "value-range",
        )
    return n_layer


def _in_or_absent(header: GgufHeader, key: str, allowed: frozenset[int], what: str) -> None:
    value = _integer(header, key, 0, 2**32 - 1)
    if isinstance(value, int) and value not in allowed:
        raise refuse(f"has {key} = {value}, not {what}", "value-range")


def _is_string_array(value: object) -> bool:
    if isinstance(value, list):
        return all(isinstance(v, str) for v in value)
    return getattr(value, "element_type", None) == "string"


def _check_swa_pattern(header: GgufHeader, key: str) -> None:
    value = header.metadata.get(key)
    if value is None:
        return
    if isinstance(value, list):
        if len(value) > LLAMA_MAX_LAYERS or not all(isinstance(v, (bool, int)) for v in value):
            raise refuse(f"has a {key} that is not one flag per block", "value-type")
        return
    if not _is_scalar(value):
        raise refuse(f"has a {key} list far longer than llama.cpp allows", "layout")
    _in_range(key, value, 0, LLAMA_MAX_LAYERS)


def _check_expert_counts(header: GgufHeader, arch: str | None, n_layer: int) -> None:
    if arch is None:
        return
    a = f"{arch}."
    n_expert = _integer(header, a + "expert_count", 0, LLAMA_MAX_EXPERTS)
    used = _integer(
        header, a + "expert_used_count", 0, LLAMA_MAX_EXPERTS, per_layer=n_layer or None
    )
    groups = _integer(header, a + "expert_group_count", 0, LLAMA_MAX_EXPERTS)
    group_used = _integer(header, a + "expert_group_used_count", 0, LLAMA_MAX_EXPERTS)
    n_expert = n_expert if isinstance(n_expert, int) else 0
    used_max = max(used) if isinstance(used, list) and used else used or 0
    groups = groups if isinstance(groups, int) else 0
    group_used = group_used if isinstance(group_used, int) else 0
    assert isinstance(used_max, int)
    consistent = used_max <= n_expert and (
        (n_expert == 0 and groups == 0)
        or (
            n_expert > 0
            and used_max > 0
            and groups < n_expert
            and (groups <= 1 or (n_expert % groups == 0 and 0 < group_used < groups))
        )
    )
    if not consistent:
        raise refuse(
            f"has inconsistent expert counts ({n_expert} experts, {used_max} used, {groups} "
            f"groups, {group_used} groups used); llama.cpp would abort on them",
            "value-range",
        )


def _check_floats(header: GgufHeader, arch: str | None) -> None:
    prefix = f"{arch}." if arch else None
    for key, value in header.metadata.items():
        values = value if isinstance(value, list) and prefix and key.startswith(prefix) else [value]
        for item in values:
            if isinstance(item, float) and not math.isfinite(item):
                raise refuse(f"has {item!r} as {shown(key)}", "value-range")
    if arch:
        for key in ("attention.layer_norm_rms_epsilon", "attention.layer_norm_epsilon"):
            eps = header.metadata.get(f"{arch}.{key}")
            if eps is not None and (not isinstance(eps, (int, float)) or eps < 0):
                raise refuse(f"has {arch}.{key} that is not a small positive number", "value-type")
        base = header.metadata.get(f"{arch}.rope.freq_base")
        if base is not None and (not isinstance(base, (int, float)) or base <= 0):
            raise refuse(f"has {arch}.rope.freq_base that is not a positive number", "value-type")


# ---- the tensors against the metadata -----------------------------------------------------


def _check_blocks_present(header: GgufHeader, n_layer: int) -> None:
    top = -1
    for tensor in header.tensors:
        found = _BLOCK_TENSOR.match(tensor.name)
        if found:
            index = int(found.group(1))
            if index >= n_layer:
                raise refuse(
                    f"has tensor {shown(tensor.name)} beyond its {n_layer} blocks", "layout"
                )
            top = max(top, index)
    split = header.metadata.get("split.count")
    # A split model's first part holds only some blocks; a whole file holds them all.
    if top >= 0 and top + 1 != n_layer and not (isinstance(split, int) and split > 1):
        raise refuse(f"says it has {n_layer} blocks but holds tensors for {top + 1}", "layout")


def _check_kv_widths(header: GgufHeader, arch: str | None, n_layer: int) -> None:
    if arch in NOT_PLAIN_KV:
        return  # recurrent and hybrid models shape their attention tensors their own way
    sizes = {
        "k": _sizes(header.key_length, _opt(header, "attention.key_length_swa")),
        "v": _sizes(header.value_length, _opt(header, "attention.value_length_swa")),
    }
    for tensor in header.tensors:
        found = _BLOCK_TENSOR.match(tensor.name)
        if not found or len(tensor.shape) != 2:
            continue
        which = tensor.name[found.end() :].removesuffix(".weight")
        if which not in ("attn_k", "attn_v"):
            continue
        layer = int(found.group(1))
        n_kv = header.head_count_kv_at(layer)
        head_sizes = sizes[which[-1]]
        if tensor.shape[1] not in {n_kv * size for size in head_sizes}:
            raise refuse(
                f"says block {layer} has {n_kv} KV heads of {' or '.join(map(str, head_sizes))} "
                f"values, but its {which} tensor is {tensor.shape[1]:,} wide",
                "layout",
            )


def _sizes(*sizes: int | None) -> list[int]:
    return sorted({size for size in sizes if size is not None})


def _opt(header: GgufHeader, suffix: str) -> int | None:
    value = header.arch_get(suffix)
    return value if isinstance(value, int) else None
