"""Environment switches that change what llama.cpp computes, or how fast, in a way a saved
comparison must say: a run measured with one of them set is not the default configuration
(run 32's benches with and without llama.cpp's rotation differ in compute buffer and quality).
The engine process reads them from the environment it was started with, which is what llama.cpp
and our kernel patches read too."""

from __future__ import annotations

from collections.abc import Mapping

from app.platform.safe_text import safe_text

# name -> what it changes, in the user's words
SWITCHES = {
    "LLAMA_ATTN_ROT_DISABLE": "llama.cpp's rotation of a quantized K/V cache",
    "KVSTUDIO_FA_Q8_0_K_IN_PLACE": "the prompt kernel reading a q8_0 K in place (patch 0005)",
    "KVSTUDIO_FA_VEC_LONG_KV_FROM": "where the long-KV decode kernel starts (patch 0007)",
    # read by kernel candidates not yet adopted (docs/kernel-log.md, Q): a bench of one records
    # which level or variant it ran
    "KVSTUDIO_FUSE_ROTATION": "which fusions of llama.cpp's rotations run (candidates F, G, I)",
    "KVSTUDIO_FA_V_CONVERT": "how the decode kernel makes a q8_0 V float (candidate H)",
}
_MAX_VALUE = 20


def switches_set(values: object) -> tuple[tuple[str, str], ...]:
    """The known switches in `values` (the engine's environment, or a saved comparison's
    `llama_switches`), with their values as set ("0" too: it was set, and the words show what
    to); unknown names left out and values cleaned, since a saved run is a file like any other."""
    if not isinstance(values, Mapping):
        return ()
    return tuple(
        (name, safe_text(str(values[name]), _MAX_VALUE)) for name in SWITCHES if name in values
    )


def switches_text(switches: tuple[tuple[str, str], ...]) -> str:
    """ "LLAMA_ATTN_ROT_DISABLE=1 (llama.cpp's rotation of a quantized K/V cache)", joined by
    "; "; "" when none was set."""
    return "; ".join(f"{name}={value} ({SWITCHES[name]})" for name, value in switches)
