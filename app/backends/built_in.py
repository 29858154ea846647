"""Where the built-in backend's libraries are, found without importing llama_cpp.

A module of its own so the engine can ask without importing the backend store, whose package
unpacking brings in the Hub client (huggingface_hub, httpx): 0.45 s of imports in every engine
process, for a path.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path


def built_in_folder() -> Path | None:
    """The folder of the built-in backend's libraries: llama-cpp-python's `llama_cpp/lib`
    (the portable CPU package's files in the installed app), found without importing
    llama_cpp, which would load them; None when llama-cpp-python is not installed."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "lib"
