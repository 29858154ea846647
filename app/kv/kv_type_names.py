"""The KV cache type names llama.cpp's `--cache-type-k/-v` accept (common/arg.cpp
kv_cache_types), without the `gguf` package: settings are checked at every CLI start, and a
command that imports llama_cpp itself (doctor) must import it before numpy."""

from __future__ import annotations

KV_TYPE_NAMES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
