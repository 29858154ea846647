"""Every node of one decode step's graph, in the order llama.cpp's backends run it (issue 26:
which nodes a kernel fusion may take together; docs/kernel-log.md, O).

Loads the model as the app's bench does (Flash Attention, the K/V types asked for), decodes
`--depth` tokens, then one more through a context whose scheduler asks llama.cpp's eval callback
about every node before it runs (views and reshapes included, which GGML_SCHED_DEBUG leaves out).
Prints one JSON object a node: its index, op (ggml_op_desc), name, its sources (the index of an
earlier node, or the name of a tensor that is not one: a weight, an input, the cache) and where its
data lies (its backend buffer, offset and bytes: which nodes share memory).

    python scripts/decode_graph_ops.py MODEL --kv q8_0/f16 [--depth 8]

The node list is the graph's own, so it is the same on every backend; the memory offsets are those
of the backend that ran it (this build's).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
from pathlib import Path

# llama_cpp before anything that imports numpy: the other order crashed model loads on the H200
# (docs/llama-cpp-notes.md).
import llama_cpp

from app.engine.loader import weights_repacked
from app.kv.kv_types import KvMode
from app.platform.errors import AppError


class GgmlTensor(ctypes.Structure):
    """struct ggml_tensor of the pinned llama.cpp (ggml/include/ggml.h)."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("buffer", ctypes.c_void_p),
        ("ne", ctypes.c_int64 * 4),
        ("nb", ctypes.c_size_t * 4),
        ("op", ctypes.c_int),
        ("op_params", ctypes.c_int32 * 16),
        ("flags", ctypes.c_int32),
        ("src", ctypes.c_void_p * 10),
        ("view_src", ctypes.c_void_p),
        ("view_offs", ctypes.c_size_t),
        ("data", ctypes.c_void_p),
        ("name", ctypes.c_char * 64),
        ("extra", ctypes.c_void_p),
        ("padding", ctypes.c_char * 8),
    ]


def _ggml_base() -> ctypes.CDLL:
    lib = Path(llama_cpp.__file__).parent / "lib"
    base = ctypes.CDLL(str(next(lib.glob("libggml-base.so*"))))
    base.ggml_op_desc.restype = ctypes.c_char_p
    base.ggml_op_desc.argtypes = [ctypes.c_void_p]
    base.ggml_nbytes.restype = ctypes.c_size_t
    base.ggml_nbytes.argtypes = [ctypes.c_void_p]
    return base


def decode_graph(model: Path, mode: KvMode, depth: int) -> list[dict[str, object]]:
    base = _ggml_base()
    asked: list[int] = []

    def ask(tensor: int, is_ask: bool, user: int) -> bool:
        if is_ask:
            asked.append(tensor)
        return False  # never stop to look: the graph runs as it would without the callback

    callback = llama_cpp.ggml_backend_sched_eval_callback(ask)
    # Without repacked weights, as the app loads by default (llama.cpp's AMX kernels crash).
    with weights_repacked(False):
        llm = llama_cpp.Llama(
            model_path=str(model), n_ctx=depth + 16, n_gpu_layers=-1, flash_attn=True,
            type_k=mode.k.ggml_id, type_v=mode.v.ggml_id, n_batch=512, n_ubatch=512,
            verbose=False,
        )  # fmt: skip
    params = llm.context_params
    params.cb_eval = callback
    ctx = llama_cpp.llama_init_from_model(llm.model, params)
    try:
        tokens = (llama_cpp.llama_token * (depth + 1))(*[1 + i % 100 for i in range(depth + 1)])
        if depth and llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(tokens, depth)):
            raise AppError("llama.cpp could not decode the first tokens.")
        asked.clear()
        last = ctypes.cast(ctypes.byref(tokens, depth * ctypes.sizeof(llama_cpp.llama_token)),
                           ctypes.POINTER(llama_cpp.llama_token))  # fmt: skip
        if llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(last, 1)):
            raise AppError("llama.cpp could not decode the step.")
        return _describe(base, asked)
    finally:
        llama_cpp.llama_free(ctx)
        llm.close()


def _describe(base: ctypes.CDLL, nodes: list[int]) -> list[dict[str, object]]:
    index = {address: i for i, address in enumerate(nodes)}
    tensors = [GgmlTensor.from_address(address) for address in nodes]
    # Offsets from the lowest node in the same backend buffer (the compute buffer, the cache):
    # enough to see which nodes share memory.
    buffers = sorted({t.buffer or 0 for t in tensors})
    lowest = {b: min(t.data or 0 for t in tensors if (t.buffer or 0) == b) for b in buffers}
    described: list[dict[str, object]] = []
    for i, (address, t) in enumerate(zip(nodes, tensors, strict=True)):
        sources: list[object] = []
        for src in t.src:
            if src:
                sources.append(index.get(src, GgmlTensor.from_address(src).name.decode()))
        described.append(
            {
                "i": i,
                "op": base.ggml_op_desc(address).decode(),
                "name": t.name.decode(),
                "src": sources,
                "buffer": buffers.index(t.buffer or 0),
                "offset": (t.data or 0) - lowest[t.buffer or 0],
                "bytes": base.ggml_nbytes(address),
            }
        )
    return described


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--kv", default="q8_0/f16", help="K/V types, as kvstudio's modes")
    parser.add_argument("--depth", type=int, default=8, help="tokens decoded before the step")
    args = parser.parse_args(argv)
    try:
        mode = KvMode.parse(args.kv)
    except AppError as error:
        print(error, file=sys.stderr)
        return 2
    if args.depth < 0 or args.depth > 4096:
        print("The depth must be between 0 and 4096 tokens.", file=sys.stderr)
        return 2
    if not args.model.is_file():
        print(f"No model file at {args.model}.", file=sys.stderr)
        return 2
    try:
        nodes = decode_graph(args.model, mode, args.depth)
    except AppError as error:
        print(error, file=sys.stderr)
        return 1
    for node in nodes:
        print(json.dumps(node))
    return 0


if __name__ == "__main__":
    sys.exit(main())
