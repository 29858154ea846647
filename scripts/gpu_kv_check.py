"""On a CUDA build: the KV lines and compute buffers llama.cpp reports with every layer on the GPU,
next to app.kv.kv_cache / app.kv.fit's numbers. Writes $OUT/gpu_kv_check.json (kept as
docs/kv-accounting-h200.json). Run after `scripts/gpu_reference_run.sh build`:
    PYTHONPATH=$PWD/.device-build/llama:/tmp/site:$PWD python3 scripts/gpu_kv_check.py
"""

import json
import os
import time

import llama_cpp  # before numpy (docs/llama-cpp-notes.md: import order)

from app.engine.llama_log import install
from app.engine.log_parse import parse_log
from app.kv.fit import memory_need
from app.kv.kv_cache import kv_cache_bytes
from app.kv.kv_types import KvMode
from app.models.gguf_read import read_gguf_header
from tests.gguf_factory import write_tiny_gguf

OUT = os.environ.get("OUT", "/tmp")
router = install()
llama_cpp.llama_backend_init()
t = time.time()
models = {
    "llama3-8b-widths-2L": write_tiny_gguf(
        "/tmp/l8.gguf",
        arch="llama",
        n_layer=2,
        n_head=32,
        n_head_kv=8,
        head_dim=128,
        n_embd=4096,
        n_ff=14336,
        n_ctx_train=131072,
        vocab=None if os.environ.get("SMALL") else [f"w{i}" for i in range(128256 - 259)],
    ),
    "gemma3-270m-widths-6L": write_tiny_gguf(
        "/tmp/g3.gguf",
        arch="gemma3",
        n_layer=6,
        n_head=4,
        n_head_kv=1,
        head_dim=256,
        n_embd=640,
        n_ff=2048,
        n_ctx_train=131072,
        sliding_window=512,
        vocab=None if os.environ.get("SMALL") else [f"w{i}" for i in range(262144 - 259)],
    ),
}
print("models written in", round(time.time() - t, 1), "s", flush=True)
rows = []
for name, path in models.items():
    header = read_gguf_header(path)
    mp = llama_cpp.llama_model_default_params()
    mp.n_gpu_layers = 999
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), mp)
    assert model
    for n_ctx in (8192, 32768, 131072):
        for label in ("f16/f16", "q8_0/f16", "q8_0/q8_0"):
            mode = KvMode.parse(label)
            p = llama_cpp.llama_context_default_params()
            p.n_ctx = n_ctx
            p.n_batch = 512
            p.n_ubatch = 512
            p.type_k = mode.k.ggml_id
            p.type_v = mode.v.ggml_id
            p.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
            p.swa_full = False
            router.flush()
            router.take_lines()
            ctx = llama_cpp.llama_init_from_model(model, p)
            assert ctx
            llama_cpp.llama_free(ctx)
            router.flush()
            parsed = parse_log(router.take_lines())
            est = kv_cache_bytes(header, n_ctx, mode)
            need = memory_need(header, n_ctx, mode, on_gpu=True)
            compute = {c.device: c.bytes for c in parsed.compute_buffers}
            row = {
                "model": name,
                "n_ctx": n_ctx,
                "kv": label,
                "kv_lines_equal": [c.line for c in parsed.kv_caches]
                == [c.log_line() for c in est.caches],
                "kv_lines": [c.line for c in parsed.kv_caches],
                "kv_devices": [list(c.devices) for c in parsed.kv_caches],
                "compute_buffers": compute,
                "compute_estimate": need.compute_bytes,
                "warnings": [w.text for w in parsed.warnings],
            }
            rows.append(row)
            print(
                name,
                n_ctx,
                label,
                row["kv_lines_equal"],
                {k: round(v / 2**20, 2) for k, v in compute.items()},
                round(need.compute_bytes / 2**20, 2),
                flush=True,
            )
    llama_cpp.llama_model_free(model)
with open(os.path.join(OUT, "gpu_kv_check.json"), "w") as f:
    json.dump(
        {"system_info": llama_cpp.llama_print_system_info().decode(), "rows": rows}, f, indent=1
    )
