"""A device llama.cpp can put a model's layers on, as the split across devices sees it.

Apart from the split arithmetic (app/kv/rpc_fit.py) because the engine's messages carry it, and
the engine process imports its messages before llama_cpp, when nothing may import numpy yet.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SplitDevice:
    """A device llama.cpp can put layers on, with the memory it reports."""

    name: str  # llama.cpp's: "RPC0", "CUDA0"
    description: str  # "127.0.0.1:50052" for a worker's device, else the device's own words
    free_bytes: int  # as llama.cpp reads it (what the split follows)
    total_bytes: int
    budget_bytes: int | None = None  # what the check allows (KVSTUDIO_FREE_MEMORY caps it)

    @property
    def label(self) -> str:
        return f"{self.name} ({self.description})"

    @property
    def budget(self) -> int:
        return self.free_bytes if self.budget_bytes is None else self.budget_bytes
