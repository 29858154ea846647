"""The verdict on one GPU library's Flash Attention vector kernels: per architecture, the kernels
grouped by their K-V pair and judged with kernels/isa_report.py's rules. kernels/lib_isa.py
(CUDA) and kernels/hip_fatbin.py (HIP) read the machine code; both hand it here."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kernels.isa_report import KernelCount, build_report, fa_vec_kernel, is_int8_k

CONTROL = "f16-f16"


@dataclass
class LibraryIsa:
    library: str  # the file that was read
    tool: str  # how it was read, e.g. "cuobjdump -sass"
    reports: list[dict] = field(default_factory=list)  # isa_report reports, one per architecture
    not_counted: list[str] = field(default_factory=list)  # architectures without the instruction
    missing: str | None = None  # one sentence: the tool that is missing, when nothing was counted

    @property
    def problems(self) -> list[str]:
        return [v for r in self.reports for v in r["violations"]]


def pairs_to_count(asked: str, present: set[str]) -> dict[str, str]:
    """The asked pair and, when the library has it, the f16 control: {pair: role}."""
    roles = {asked: "int8-K" if is_int8_k(asked) else ("control" if asked == CONTROL else "asked")}
    if CONTROL in present:
        roles.setdefault(CONTROL, "control")
    return roles


def judge(
    library: Path,
    version: str,
    tool: str,
    instruction_of: dict[str, str | None],
    kernels: dict[str, list[KernelCount]],
    asked: str,
) -> LibraryIsa:
    """Per architecture, the library's flash_attn_ext_vec kernels grouped by their K-V pair."""
    result = LibraryIsa(str(library), tool)
    for arch, instruction in instruction_of.items():
        if instruction is None:
            result.not_counted.append(f"{arch}: no int8 dot instruction on this architecture")
            continue
        by_pair: dict[str, list[KernelCount]] = {}
        for k in kernels.get(arch, []):
            fa = fa_vec_kernel(k.demangled)
            if fa:
                by_pair.setdefault(f"{fa.k_type}-{fa.v_type}", []).append(k)
        roles = pairs_to_count(asked, set(by_pair))
        result.reports.append(
            build_report(
                version=version,
                sdist_sha256="",
                toolchain=[tool],
                flags=[],
                targets=[arch],
                instance_files={pair: library.name for pair in roles},
                kernels={arch: {pair: by_pair.get(pair, []) for pair in roles}},
                instruction=instruction,
                command="python -m kernels verify",
                roles=roles,
            )
        )
    return result
