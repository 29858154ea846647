"""Which folders the llama.cpp libraries this process runs were loaded from, read from the
process's own memory map (Linux).

Why not the folder llama-cpp-python was pointed at: its libllama loads the GPU library
(libggml-cuda, libggml-hip, where the Flash Attention kernels are) through the dynamic loader,
which follows libllama's RUNPATH and LD_LIBRARY_PATH. A libllama copied out of a llama.cpp build
tree keeps that tree's RUNPATH, so it loads whatever the tree built last: on the H200 two benches
of two builds both ran the newer one's kernels while the note beside libllama named the older.
The memory map says which file is running, whatever led the loader there.
"""

from __future__ import annotations

import re
from pathlib import Path

# The libraries whose machine code is the Flash Attention kernels on a GPU (one per backend).
GPU_LIBRARY = re.compile(r"libggml-(cuda|hip|musa)\.so(\.\d+)*")
_MAPS = Path("/proc/self/maps")
_DELETED = " (deleted)"  # the kernel's mark on a mapped file since removed or replaced


def mapped_file(maps_text: str, library: re.Pattern[str]) -> Path | None:
    """The first mapped file whose name is `library`, from /proc/<pid>/maps text (address,
    perms, offset, device, inode, path: the path may hold spaces); None if none is."""
    for line in maps_text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or not fields[5].startswith("/"):
            continue  # anonymous memory, [heap], [stack] and the like
        path = Path(fields[5].removesuffix(_DELETED))
        if library.fullmatch(path.name):
            return path
    return None


def loaded_file(library: re.Pattern[str]) -> Path | None:
    """The file this process loaded `library` from; None where it has not, or where there is
    no /proc (macOS, Windows: there llama-cpp-python's own folder is all there is to go on)."""
    try:
        maps_text = _MAPS.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return mapped_file(maps_text, library)


def loaded_folder(library: re.Pattern[str]) -> Path | None:
    """The folder of loaded_file(library)."""
    path = loaded_file(library)
    return path.parent if path is not None else None
