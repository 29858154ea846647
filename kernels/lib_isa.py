"""Count the int8 dot instruction in the installed backend library's Flash Attention vector kernels.

`python -m kernels verify` calls this on a CUDA or HIP build: the machine code read from
llama_cpp/lib/libggml-cuda.so (`cuobjdump`) or libggml-hip.so (its .hip_fatbin code objects,
kernels/hip_fatbin.py) is judged with kernels/isa_report.py's rules, one report per GPU
architecture the library holds machine code for. Each K type is read from the kernel's template
arguments, so the library's own kernels for the asked K/V pair are counted, not a separate compile.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

from kernels import cuda_tools, sass
from kernels.hip_fatbin import count_hip
from kernels.isa_report import KernelCount
from kernels.isa_verdict import LibraryIsa, judge

LIBRARIES = {"cuda": "libggml-cuda.so", "hip": "libggml-hip.so"}
# The backend names llama.cpp's system-info line uses for these builds.
BACKENDS = {"CUDA": "cuda", "ROCm": "hip", "HIP": "hip"}


def find_library(lib_dir: Path, backend: str) -> Path | None:
    name = LIBRARIES[backend]
    found = [lib_dir / name, *sorted(lib_dir.glob(name + ".*"))]
    return next((p for p in found if p.is_file()), None)


def count_cuda(library: Path, version: str, asked: str) -> LibraryIsa:
    """cuobjdump extracts the library's cubins; those naming flash_attn_ext_vec are disassembled
    (the whole library's SASS is hundreds of megabytes of text)."""
    tool = "cuobjdump -sass"
    need = cuda_tools.missing(("cuobjdump", "nvdisasm"))
    demangler = cuda_tools.find_demangler()
    if not demangler:
        need.append("c++filt")
    if need:
        return LibraryIsa(
            str(library), tool, missing=cuda_tools.missing_sentence(need, "IDP.4A was not counted")
        )
    cuobjdump = cuda_tools.find("cuobjdump")
    assert cuobjdump and demangler
    env = cuda_tools.cuobjdump_env()
    functions: list[sass.SassFunction] = []
    with tempfile.TemporaryDirectory(prefix="kvstudio-sass-") as tmp:
        run = subprocess.run(
            [cuobjdump, "-xelf", "all", str(library.resolve())],
            cwd=tmp,
            capture_output=True,
            text=True,
            check=False,
            env=env,
        )
        if run.returncode != 0:
            raise OSError(f"cuobjdump could not extract the machine code of {library.name}.")
        for cubin in sorted(Path(tmp).glob("*.cubin")):
            if b"flash_attn_ext_vec" not in cubin.read_bytes():
                continue
            listing = subprocess.run(
                [cuobjdump, "-sass", str(cubin)],
                capture_output=True,
                text=True,
                check=False,
                env=env,
            )
            if listing.returncode != 0:
                raise OSError(f"cuobjdump -sass failed on {cubin.name} of {library.name}.")
            functions += sass.parse(listing.stdout)
    fa = [f for f in functions if "flash_attn_ext_vec" in f.symbol]
    names = cuda_tools.demangle(demangler, sorted({f.symbol for f in fa})) if fa else {}
    kernels: dict[str, list[KernelCount]] = {}
    for f in fa:
        kernels.setdefault(f.arch, []).append(
            KernelCount(f.symbol, names[f.symbol], f.count, f.traps)
        )
    archs = sorted({f.arch for f in functions if f.arch}, key=_arch_order)
    instruction_of = {a: sass.INSTRUCTION if sass.has_dp4a(a) else None for a in archs}
    return judge(library, version, tool, instruction_of, kernels, asked)


def _arch_order(arch: str) -> tuple[int, str]:
    digits = "".join(c for c in arch if c.isdigit())
    return (int(digits or 0), arch)


def count_installed(backend: str, asked: str, lib_dir: Path | None = None) -> LibraryIsa:
    """Count in the installed llama_cpp's library for `backend` ("cuda" or "hip")."""
    import llama_cpp  # before numpy: see docs/llama-cpp-notes.md (import order)

    # A backend package (LLAMA_CPP_LIB_PATH) when one is loaded, else the wheel's own folder.
    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    lib_dir = lib_dir or (Path(override) if override else Path(llama_cpp.__file__).parent / "lib")
    library = find_library(lib_dir, backend)
    if library is None:
        return LibraryIsa(
            str(lib_dir / LIBRARIES[backend]),
            "",
            missing=f"{LIBRARIES[backend]} is not in {lib_dir}, so nothing was counted.",
        )
    return count_library(library, backend, asked, getattr(llama_cpp, "__version__", ""))


def count_library(library: Path, backend: str, asked: str, version: str = "") -> LibraryIsa:
    """Count in one library file; `asked` is a K-V pair such as "q8_0-f16"."""
    version = version or package_version(library)
    if backend == "cuda":
        return count_cuda(library, version, asked)
    return count_hip(library, version, asked)


def package_version(library: Path) -> str:
    """llama_cpp's __version__ beside llama_cpp/lib/, read without importing llama_cpp."""
    init = library.parent.parent / "__init__.py"
    match = re.search(r'__version__\s*=\s*"([^"]+)"', init.read_text()) if init.is_file() else None
    return match.group(1) if match else ""


def summary_lines(isa: LibraryIsa) -> list[str]:
    """What verify prints: per architecture and pair, kernels, how many hold the instruction."""
    name = Path(isa.library).name
    if isa.missing:
        where = f" in {name}" if name else ""
        return [f"int8 dot instructions:  not counted{where}: {isa.missing}"]
    lines = [f"int8 dot instructions:  read from {name} ({isa.tool})"]
    for report in isa.reports:
        (arch,) = report["targets"]
        instruction = report["instruction"]
        for pair, instance in report["instances"].items():
            entries = report["kernels"][arch][pair]
            real = [e["count"] for e in entries if not e["traps"]]
            stubs = len(entries) - len(real)
            spread = f", {min(real)}-{max(real)} each" if real and max(real) else ""
            with_it = sum(1 for e in entries if e["count"])
            total = sum(e["count"] for e in entries)
            lines.append(
                f"  {arch} {pair} ({instance['role']}): {len(entries)} flash_attn_ext_vec kernels, "
                f"{with_it} with {instruction}{spread}; {total} in all"
                + (f"; {stubs} trapping stub{'s' if stubs != 1 else ''}" if stubs else "")
            )
    lines += [f"  {line}" for line in isa.not_counted]
    if not isa.reports and not isa.not_counted:
        lines.append("  no GPU machine code was found in it")
    return lines
