"""Read `cuobjdump -sass` listings: how often each kernel uses NVIDIA's int8 dot instruction.

Pure text parsing; kernels/isa_cuda.py and kernels/lib_isa.py run the tools. `IDP.4A` is what
`__dp4a` compiles to (four signed or unsigned bytes of each operand multiplied pairwise and summed
into a 32-bit integer); llama.cpp's `ggml_cuda_dp4a` is `__dp4a` from compute capability 6.1 on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

INSTRUCTION = "IDP.4A"
TRAP = "BPT.TRAP"  # what __trap() compiles to: llama.cpp's NO_DEVICE_CODE stubs end in it
DP4A_FROM = 61  # GGML_CUDA_CC_DP4A: below compute capability 6.1 ggml_cuda_dp4a multiplies bytes

_CODE_FOR = re.compile(r"^\s*code for (?P<arch>sm_\w+)")
_FUNCTION = re.compile(r"^\s*Function : (?P<symbol>\S+)\s*$")
# "        /*0160*/   @!P0 IDP.4A.S8.S8 R4, R5, R6, R4 ;   /* 0x... */": an address comment, an
# optional predicate guard, then the mnemonic with its modifiers. Encoding-only lines start "/* 0x".
_INSTRUCTION_LINE = re.compile(
    r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]\s+)?(?P<op>[A-Z][A-Z0-9_.]*)"
)
_SM = re.compile(r"^sm_(?P<cc>\d+)[a-z]?$")


@dataclass(frozen=True)
class SassFunction:
    arch: str  # "sm_90"; "" if the listing named none before this function
    symbol: str  # mangled; "" for instructions before the first "Function :" line
    count: int  # IDP.4A instructions, any modifiers (.S8.S8, .U8.S8, ...)
    traps: bool  # holds BPT.TRAP


def is_dp4a(op: str) -> bool:
    return op == INSTRUCTION or op.startswith(INSTRUCTION + ".")


def parse(listing: str) -> list[SassFunction]:
    """Every function of a listing, in order, with its arch (one listing may hold several cubins).

    Only mnemonics count, never a symbol name or a comment. Instructions before the first
    function are kept under the symbol "" so that nothing can hide there.
    """
    found: list[SassFunction] = []
    arch, symbol, count, traps, started = "", "", 0, False, False

    def close() -> None:
        if started or count or traps:
            found.append(SassFunction(arch, symbol, count, traps))

    for line in listing.splitlines():
        code_for = _CODE_FOR.match(line)
        if code_for:
            close()
            arch, symbol, count, traps, started = code_for["arch"], "", 0, False, False
            continue
        function = _FUNCTION.match(line)
        if function:
            close()
            symbol, count, traps, started = function["symbol"], 0, False, True
            continue
        instruction = _INSTRUCTION_LINE.match(line)
        if instruction:
            op = instruction["op"]
            if is_dp4a(op):
                count += 1
            elif op.startswith(TRAP):
                traps = True
    close()
    return found


def has_dp4a(arch: str) -> bool:
    """Whether ggml_cuda_dp4a is the IDP.4A instruction on this arch (sm_61 and newer)."""
    match = _SM.match(arch)
    return match is not None and int(match["cc"]) >= DP4A_FROM
