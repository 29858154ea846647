"""Read the AMD GPU code objects of an installed libggml-hip.so and count the int8 dot instruction.

A HIP library keeps its device code in the ELF section .hip_fatbin: one clang offload bundle per
compiled source file, one after another, each either plain ("__CLANG_OFFLOAD_BUNDLE__") or, from
ROCm 6.2's clang on, compressed ("CCOB" header, then zlib or zstd). Python splits and decompresses
them (zstd needs the `zstandard` package or Python 3.14); `llvm-objdump -d --mcpu=gfx...`
disassembles each target's code object: ROCm's (/opt/rocm/llvm/bin), one on PATH, or the Debian 13
root `python -m kernels isa-proof` makes (run through chroot, as root).
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kernels import isa_proof
from kernels.isa_report import KernelCount, scan
from kernels.isa_verdict import LibraryIsa, judge

BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
COMPRESSED_MAGIC = b"CCOB"
ZLIB, ZSTD = 0, 1  # llvm::compression::Format, as CCOB's method field stores it
TOOL = "llvm-objdump -d"


class FatbinError(OSError):
    """The section could not be read or a tool is missing: one sentence."""


def instruction_for(target: str) -> str | None:
    """What ggml_cuda_dp4a compiles to on this target (ggml/src/ggml-cuda/common.cuh)."""
    gfx = target.split(":")[0]
    if re.match(r"^gfx1[12][0-9a-f]{2}$", gfx):  # RDNA3, RDNA3.5, RDNA4: __builtin_amdgcn_sudot4
        return "v_dot4_i32_iu8"
    if gfx in ("gfx906", "gfx908", "gfx90a", "gfx942", "gfx950") or re.match(r"^gfx103[0-7]$", gfx):
        return "v_dot4_i32_i8"  # CDNA, RDNA2, Vega 20: __builtin_amdgcn_sdot4
    return None  # RDNA1, Vega 10 and older: byte multiplies, no dot instruction


def elf_section(data: bytes, name: str) -> bytes | None:
    """A section's bytes from a 64-bit little-endian ELF file (what x86-64 Linux builds are)."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise FatbinError("the library is not a 64-bit little-endian ELF file.")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def header(i: int) -> tuple[int, int, int]:
        base = shoff + i * shentsize
        (name_off,) = struct.unpack_from("<I", data, base)
        offset, size = struct.unpack_from("<QQ", data, base + 0x18)
        return name_off, offset, size

    _, names_off, _ = header(shstrndx)
    for i in range(shnum):
        name_off, offset, size = header(i)
        end = data.index(b"\0", names_off + name_off)
        if data[names_off + name_off : end].decode() == name:
            return data[offset : offset + size]
    return None


def _decompress(method: int, payload: bytes) -> tuple[bytes, int]:
    """(decompressed bytes, compressed bytes used) of one zlib or zstd stream."""
    if method == ZLIB:
        inflater = zlib.decompressobj()
        out = inflater.decompress(payload)
        return out, len(payload) - len(inflater.unused_data)
    if method != ZSTD:
        raise FatbinError(f"a code object bundle uses an unknown compression (method {method}).")
    try:
        from compression import zstd  # type: ignore[import-not-found]  # Python 3.14

        stream = zstd.ZstdDecompressor()
    except ImportError:
        try:
            import zstandard  # type: ignore[import-not-found]
        except ImportError:
            raise FatbinError(
                "the library's code objects are zstd-compressed and this Python has no zstd "
                "decompressor (pip install zstandard)."
            ) from None
        stream = zstandard.ZstdDecompressor().decompressobj()
    out = stream.decompress(payload)
    return out, len(payload) - len(stream.unused_data)


def _uncompressed_bundle(data: bytes, start: int) -> tuple[dict[str, bytes], int]:
    """{triple: code object} of the plain bundle at `start`, and where it ends."""
    (count,) = struct.unpack_from("<Q", data, start + len(BUNDLE_MAGIC))
    pos, end = start + len(BUNDLE_MAGIC) + 8, start
    objects = {}
    for _ in range(count):
        offset, size, triple_size = struct.unpack_from("<QQQ", data, pos)
        triple = data[pos + 24 : pos + 24 + triple_size].decode("ascii", "replace")
        pos += 24 + triple_size
        objects[triple] = data[start + offset : start + offset + size]
        end = max(end, start + offset + size, pos)
    return objects, end


def _compressed_bundle(data: bytes, start: int) -> tuple[dict[str, bytes], int]:
    version, method = struct.unpack_from("<HH", data, start + 4)
    if version == 1:  # no total size: the stream ends where the decompressor stops
        header, total = 16, None
    elif version == 2:
        total, _ = struct.unpack_from("<II", data, start + 8)
        header = 24
    elif version == 3:
        total, _ = struct.unpack_from("<QQ", data, start + 8)
        header = 32
    else:
        raise FatbinError(f"a compressed code object bundle has an unknown version ({version}).")
    payload_end = start + total if total else len(data)
    inner, used = _decompress(method, data[start + header : payload_end])
    if not inner.startswith(BUNDLE_MAGIC):
        raise FatbinError("a compressed code object bundle did not hold a bundle.")
    objects, _ = _uncompressed_bundle(inner, 0)
    return objects, (payload_end if total else start + header + used)


def bundles(fatbin: bytes) -> Iterator[dict[str, bytes]]:
    """Each bundle of a .hip_fatbin section, plain or compressed, in order."""
    pos = 0
    while True:
        found = [
            i
            for i in (fatbin.find(BUNDLE_MAGIC, pos), fatbin.find(COMPRESSED_MAGIC, pos))
            if i >= 0
        ]
        if not found:
            return
        start = min(found)
        if fatbin.startswith(BUNDLE_MAGIC, start):
            objects, pos = _uncompressed_bundle(fatbin, start)
        else:
            objects, pos = _compressed_bundle(fatbin, start)
        yield objects


def code_objects(library: Path) -> dict[str, list[bytes]]:
    """{target: [code object, ...]} of every bundle in the library's .hip_fatbin."""
    section = elf_section(library.read_bytes(), ".hip_fatbin")
    if section is None:
        raise FatbinError(
            f"{library.name} has no .hip_fatbin section, so it holds no HIP device code."
        )
    found: dict[str, list[bytes]] = {}
    for objects in bundles(section):
        for triple, blob in objects.items():
            if triple.startswith("host-") or not blob:
                continue
            target = triple.rsplit("--", 1)[-1].split(":")[0]  # "...amdhsa--gfx90a:xnack-"
            found.setdefault(target, []).append(blob)
    return found


@dataclass(frozen=True)
class Disassembler:
    """llvm-objdump on this system, or the one in the Debian 13 root run through chroot."""

    objdump: str | None = None
    root: Path | None = None

    def run(self, blob: bytes, target: str) -> str:
        if self.objdump:
            with tempfile.NamedTemporaryFile(suffix=".co") as f:
                f.write(blob)
                f.flush()
                return self._check(
                    subprocess.run(
                        [self.objdump, "-d", f"--mcpu={target}", f.name],
                        capture_output=True,
                        text=True,
                        check=False,
                    ),
                    target,
                )
        assert self.root is not None
        work = self.root / "kvstudio" / "work" / "lib"
        work.mkdir(parents=True, exist_ok=True)
        (work / f"{target}.co").write_bytes(blob)
        try:
            return isa_proof._in_root(
                self.root, f"llvm-objdump -d --mcpu={target} /kvstudio/work/lib/{target}.co"
            )
        except isa_proof.IsaProofError as error:
            raise FatbinError(str(error)) from None

    @staticmethod
    def _check(result: subprocess.CompletedProcess[str], target: str) -> str:
        if result.returncode != 0:
            tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise FatbinError(
                f"llvm-objdump could not disassemble the {target} code: {tail.strip()}"
            )
        return result.stdout


def find_disassembler() -> Disassembler | None:
    rocm = sorted(Path("/opt").glob("rocm*/llvm/bin/llvm-objdump"), reverse=True)
    on_path = [shutil.which("llvm-objdump")] + sorted(
        (shutil.which(f"llvm-objdump-{v}") for v in range(30, 14, -1)), key=lambda p: p is None
    )
    for candidate in [*map(str, rocm), *on_path]:
        if candidate and _knows_amdgpu(candidate):
            return Disassembler(objdump=candidate)
    root = isa_proof.default_root()
    if (root / ".kvstudio-ready").is_file() and os.geteuid() == 0:
        return Disassembler(root=root)
    return None


def _knows_amdgpu(objdump: str) -> bool:
    """LLVM 15 and older do not know gfx11 (RDNA3); `--version` lists the registered targets."""
    result = subprocess.run([objdump, "--version"], capture_output=True, text=True, check=False)
    major = re.search(r"LLVM version (\d+)", result.stdout)
    return "amdgcn" in result.stdout and major is not None and int(major.group(1)) >= 16


def count_hip(library: Path, version: str, asked: str) -> LibraryIsa:
    from kernels import cuda_tools

    disassembler = find_disassembler()
    demangler = shutil.which("llvm-cxxfilt") or cuda_tools.find_demangler()
    need = []
    if disassembler is None:
        need.append(
            "llvm-objdump 16 or newer with the AMDGPU target (ROCm has it in /opt/rocm/llvm/bin)"
        )
    if demangler is None:
        need.append("a C++ demangler (llvm-cxxfilt or c++filt)")
    if need:
        return LibraryIsa(
            str(library),
            TOOL,
            missing=f"{' and '.join(need)} {'is' if len(need) == 1 else 'are'} "
            "missing, so the int8 dot instruction was not counted.",
        )
    assert disassembler and demangler
    per_target = code_objects(library)
    scanned: dict[str, list[tuple[str, int, bool]]] = {}
    for target, blobs in per_target.items():
        instruction = instruction_for(target)
        for blob in blobs:
            if instruction is None or b"flash_attn_ext_vec" not in blob:
                continue
            listing = disassembler.run(blob, target)
            for symbol, (count, traps) in scan(listing, instruction).items():
                if "flash_attn_ext_vec" in symbol:
                    scanned.setdefault(target, []).append((symbol, count, traps))
    symbols = sorted({s for entries in scanned.values() for s, _, _ in entries})
    names = cuda_tools.demangle(demangler, symbols) if symbols else {}
    kernels = {
        t: [KernelCount(s, names[s], n, traps) for s, n, traps in entries]
        for t, entries in scanned.items()
    }
    targets = sorted(per_target)
    return judge(library, version, TOOL, {t: instruction_for(t) for t in targets}, kernels, asked)
