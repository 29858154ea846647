"""What a GGUF file's name says: its quantization and, for a split model, which part it is.

Pure text rules, shared by the Hub listing and the local library (kept apart from the Hub client
so that reading a local file's name imports no network code).
"""

from __future__ import annotations

import re

_SPLIT_RE = re.compile(r"^(?P<base>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)
# One token of a file name (split on '-', '.', '/') that names a llama.cpp quantization.
_QUANT_RE = re.compile(
    r"^(I?Q\d+(?:_[A-Z0-9]+)*|BF16|F16|FP16|F32|FP32|TQ\d_\d|MXFP4(?:_MOE)?)$", re.IGNORECASE
)


def parse_quantization(path: str) -> str | None:
    """The quantization a GGUF's name states ('model-Q4_K_M.gguf' -> 'Q4_K_M'), else None.

    The last matching token wins, so a folder name and a file name agree or the file wins;
    'UD-Q4_K_XL' (unsloth dynamic) keeps its 'UD-' prefix.
    """
    stem = path[:-5] if path.lower().endswith(".gguf") else path
    split = _SPLIT_RE.match(stem + ".gguf")
    if split:
        stem = split.group("base")
    tokens = re.split(r"[-./]", stem)
    for i in range(len(tokens) - 1, -1, -1):
        if _QUANT_RE.match(tokens[i]):
            label = tokens[i].upper()
            label = {"FP16": "F16", "FP32": "F32"}.get(label, label)
            if i > 0 and tokens[i - 1].upper() == "UD":
                return "UD-" + label
            return label
    return None


def split_info(path: str) -> tuple[str, int, int] | None:
    """('dir/base', index, count) for 'dir/base-00002-of-00005.gguf', else None."""
    match = _SPLIT_RE.match(path)
    if not match:
        return None
    return match.group("base"), int(match.group("index")), int(match.group("count"))
