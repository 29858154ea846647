"""The engine names the Flash Attention kernels of the GPU library it actually loaded, read from
its own memory map, not of the folder llama-cpp-python was pointed at: a libllama copied out of
a build tree loads the tree's newest libggml-cuda through its RUNPATH, and on the H200 that made
two benches of two builds run one build's kernels under two names (docs/kernel-log.md, N)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

from app.backends.built_in import built_in_folder
from app.backends.manifest import kernel_of_folder
from app.engine.loaded_libraries import GPU_LIBRARY, mapped_file

ROOT = Path(__file__).resolve().parents[2]
LLAMA_LIBRARY = re.compile(r"libllama\.so(\.\d+)*")  # the one llama-cpp-python loads by path

# /proc/<pid>/maps of the H200 bench, shaped as the kernel writes it: libllama from the kept
# build's folder, libggml-cuda from the build tree its RUNPATH names.
DEVICE_MAPS = """\
55d0c0a00000-55d0c0a21000 r--p 00000000 08:01 1311   /usr/bin/python3.12
7f2a10000000-7f2a10021000 rw-p 00000000 00:00 0
7f2a12000000-7f2a14e00000 r-xp 00400000 08:01 2048   /tmp/fa-build/bin/libggml-cuda.so.0.9.5
7f2a15000000-7f2a15400000 r-xp 00100000 08:01 2101   /tmp/bin-7/libllama.so.0.0.7020
7f2a15600000-7f2a15610000 r--p 00000000 08:01 2102   /tmp/bin-7/libggml-base.so.0.9.5
7ffd3c000000-7ffd3c021000 rw-p 00000000 00:00 0      [stack]
"""


def test_the_gpu_library_is_found_where_it_was_loaded_not_beside_libllama() -> None:
    assert mapped_file(DEVICE_MAPS, GPU_LIBRARY) == Path("/tmp/fa-build/bin/libggml-cuda.so.0.9.5")
    assert mapped_file(DEVICE_MAPS, LLAMA_LIBRARY) == Path("/tmp/bin-7/libllama.so.0.0.7020")


def test_paths_with_spaces_and_replaced_files_are_read_whole() -> None:
    maps = (
        "7f00-7f10 r-xp 00000000 08:01 9 /home/a user/kv studio/lib/libggml-hip.so (deleted)\n"
        "7f20-7f30 r-xp 00000000 08:01 7 /opt/libggml-cuda.so.bak\n"  # not the library's name
    )
    assert mapped_file(maps, GPU_LIBRARY) == Path("/home/a user/kv studio/lib/libggml-hip.so")
    assert mapped_file("7f20-7f30 rw-p 00000000 00:00 0 [heap]\n", GPU_LIBRARY) is None


def _engine_side(code: str) -> str:
    """`code` run in a clean interpreter that imports llama_cpp first, as the engine does."""
    result = subprocess.run(
        [sys.executable, "-c", "import llama_cpp\n" + textwrap.dedent(code)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_a_real_process_finds_the_libllama_it_loaded() -> None:
    """This machine's real memory map after llama-cpp-python loaded its libraries: libllama is
    found in the built-in folder, and no GPU library (this machine has no GPU build)."""
    out = _engine_side(
        f"""
        import re
        from app.engine.loaded_libraries import GPU_LIBRARY, loaded_folder
        print(loaded_folder(re.compile({LLAMA_LIBRARY.pattern!r})))
        print(loaded_folder(GPU_LIBRARY))
        """
    )
    assert out.splitlines() == [str(built_in_folder().resolve()), "None"]


def test_the_engine_names_the_kernels_of_the_gpu_library_it_mapped(tmp_path: Path) -> None:
    """A libggml-cuda mapped from another folder (as the dynamic loader maps it: a file mapped
    into the process) with that build's note beside it: the engine names that build, not the
    built-in folder's kernels."""
    tree = tmp_path / "fa-build" / "bin"
    tree.mkdir(parents=True)
    library = tree / "libggml-cuda.so.0.9.5"
    library.write_bytes(b"\x7fELF" + bytes(4092))
    (tree / "kvstudio-kernel.txt").write_text("kvstudio-fa.7+run33-4blocks-kconv\n")
    out = _engine_side(
        f"""
        import mmap
        from app.engine.loader import _fa_kernel
        print(repr(_fa_kernel()))
        with open({str(library)!r}, "rb") as f:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            print(repr(_fa_kernel()))
        """
    )
    before, after = out.splitlines()
    assert before == repr(kernel_of_folder(built_in_folder()))  # no GPU library: the built-in's
    assert after == repr("kvstudio-fa.7+run33-4blocks-kconv") != before
