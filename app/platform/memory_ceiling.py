"""The engine process's memory ceiling: how much memory of its own it may allocate.

A hostile or oversized model can make llama.cpp allocate without end (a tokenizer loop grew the
engine to 16 GB in 90 s); with no ceiling the kernel's OOM killer ends it, or picks another
process (the app's window). The engine sets this ceiling on itself before llama.cpp loads, so
such a load ends in the engine alone, and the app says the model needed more than the ceiling.

The ceiling is RLIMIT_DATA, not RLIMIT_AS: since Linux 4.7 RLIMIT_DATA counts the memory a
process writes to (heap, anonymous and private writable mappings), not llama.cpp's read-only
mapping of the model file nor address space reserved but not writable (GPU drivers reserve
tens of GiB of it), so a model larger than the ceiling still maps and loads as long as what it
allocates (KV cache, compute buffers) fits (tests/engine/test_engine_memory_ceiling.py).

Default: the machine's RAM less a reserve of max(1 GiB, RAM / 8), so the engine reaches its
ceiling before the machine runs out and the window, the desktop and the page cache keep room.
KVSTUDIO_ENGINE_MEMORY_LIMIT sets it: a size ('6GiB', '512MiB', '8G') or 'off'.
"""

from __future__ import annotations

import os
import sys

from app.platform import units
from app.platform.errors import BadInputError

ENV = "KVSTUDIO_ENGINE_MEMORY_LIMIT"
MIN_RESERVE = 1 << 30
_OFF = ("off", "none", "unlimited", "0")


def machine_memory() -> int | None:
    """The machine's physical memory in bytes; None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def engine_ceiling() -> int | None:
    """The engine's ceiling in bytes (None: no ceiling), from KVSTUDIO_ENGINE_MEMORY_LIMIT or
    the machine. Raises BadInputError naming the variable when its value is not a size."""
    if not sys.platform.startswith("linux"):
        return None  # RLIMIT_DATA counts allocations only on Linux (macOS ignores it)
    typed = os.environ.get(ENV, "").strip()
    if typed.lower() in _OFF:
        return None
    if typed:
        try:
            return units.parse_size(typed)
        except BadInputError:
            raise BadInputError(
                f"{ENV} must be a size such as 8GiB or 512MiB, or 'off'; it is {typed!r}."
            ) from None
    total = machine_memory()
    if total is None:
        return None
    return max(total - max(MIN_RESERVE, total // 8), MIN_RESERVE)


def apply_ceiling(limit: int) -> None:
    """Set `limit` as this process's RLIMIT_DATA (within the hard limit it already has)."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


def ceiling_is_the_limit(limit: int) -> bool:
    """Whether the engine's ceiling is what an allocation failure ran into: not when the
    process has a tighter address-space limit from whoever started it (ulimit -v, a
    container), whose failure the ceiling's sentence would misname."""
    import resource

    address_space, _ = resource.getrlimit(resource.RLIMIT_AS)
    return address_space == resource.RLIM_INFINITY or address_space > limit


def ceiling_sentence(limit: int) -> str:
    """What to tell the user when the engine ran into its ceiling."""
    return (
        f"The model needed more memory than the engine's ceiling of "
        f"{units.size(limit, 1)}; a smaller context or model fits, or set {ENV} "
        "to raise the ceiling."
    )
