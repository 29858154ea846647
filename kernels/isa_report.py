"""The int8-K instruction report: count `v_dot4_i32_iu8` per kernel, judge it, write JSON and
Markdown.

Pure functions on text and dicts; `kernels/isa_proof.py` compiles and disassembles, this module only
reads what came out. The JSON under docs/ is the record; the Markdown table is rendered from it.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

INSTRUCTION = "v_dot4_i32_iu8"
INT8_K_TYPE = "q8_0"

# ggml_type enum values (ggml/include/ggml.h) as they appear in demangled template arguments.
GGML_TYPE_NAMES = {
    0: "f32",
    1: "f16",
    2: "q4_0",
    3: "q4_1",
    6: "q5_0",
    7: "q5_1",
    8: "q8_0",
    30: "bf16",
}

_LABEL = re.compile(r"^[0-9a-f]+ <(?P<symbol>[^>]+)>:$")
# Upstream: <D, ncols, K, V, softcap>. With kernels/patches 0003: <D, ncols1, ncols2, K, V,
# softcap>, ncols2 being the Q heads of a GQA group that share one block; with 0007 a
# long_kv flag (the 3-blocks-per-SM instance launched at long context); a candidate may add more
# after it (run 34's H: the V conversion, 0-2), kept as they are.
_FA_VEC = re.compile(
    r"flash_attn_ext_vec<(?P<d>\d+), (?P<ncols>\d+), (?:(?P<heads>\d+), )?\(ggml_type\)(?P<k>\d+), "
    r"\(ggml_type\)(?P<v>\d+), (?P<softcap>true|false)(?:, (?P<long_kv>true|false))?"
    r"(?P<more>(?:, [^,<>]+)*)>"
)


@dataclass(frozen=True)
class KernelCount:
    symbol: str
    demangled: str
    count: int
    traps: bool  # holds s_trap: llama.cpp's NO_DEVICE_CODE stub, which prints an error and aborts


@dataclass(frozen=True)
class FaVecKernel:
    """The template arguments of one `flash_attn_ext_vec` instance."""

    head_size: int
    ncols: int  # query tokens per block
    k_type: str
    v_type: str
    softcap: bool
    heads: int = 1  # Q heads of a GQA group per block (kernels/patches 0003)
    long_kv: bool = False  # the instance launched from a long KV on (kernels/patches 0007)
    more: tuple[str, ...] = ()  # later template arguments a candidate added

    @property
    def label(self) -> str:
        heads = f" heads={self.heads}" if self.heads > 1 else ""
        softcap = " softcap" if self.softcap else ""
        long_kv = " long-kv" if self.long_kv else ""
        more = "".join(f" {m}" for m in self.more)
        return f"D={self.head_size} ncols={self.ncols}{heads}{softcap}{long_kv}{more}"

    @property
    def skipped_by_llama_cpp(self) -> bool:
        """fattn-vec.cuh compiles softcap variants only for head sizes 128 and 256; the rest are
        NO_DEVICE_CODE stubs (a printf and a trap) that hold no attention code at all."""
        return self.softcap and self.head_size not in (128, 256)


def scan(disassembly: str, instruction: str = INSTRUCTION) -> dict[str, tuple[int, bool]]:
    """Per function label of an `llvm-objdump -d` listing: occurrences of `instruction`, and whether
    it traps: holds an s_trap, or calls a function that does. In one compiled object llama.cpp's
    NO_DEVICE_CODE stub is inlined into the kernel; in a linked libggml-hip.so the kernel only
    calls a shared `no_device_code` function (s_getpc_b64, s_add/s_addc of the offset,
    s_swappc_b64), so the call is followed to where the s_trap is.

    Only the mnemonic (first word of an instruction line) counts, never a comment or a symbol name.
    Code before the first label is counted under "" so that nothing can hide there.
    """
    found: dict[str, tuple[int, bool]] = {}
    at_address: dict[int, str] = {}
    calls: dict[str, set[int]] = {}
    current = ""
    pc: dict[str, int] = {}  # register pair "s[0:1]" -> the address s_getpc_b64 put in it
    for line in disassembly.splitlines():
        label = _LABEL.match(line)
        if label:
            current = label.group("symbol")
            found.setdefault(current, (0, False))
            at_address[int(line.split(None, 1)[0], 16)] = current
            pc = {}
        elif line[:1].isspace():
            words = line.split("//", 1)[0].replace(",", " ").split()
            if not words:
                continue
            mnemonic = words[0]
            count, traps = found.get(current, (0, False))
            if mnemonic == instruction:
                found[current] = (count + 1, traps)
            elif mnemonic == "s_trap":
                found[current] = (count, True)
            _follow_call(words, _address_of(line), pc, calls.setdefault(current, set()))
    for symbol in found:
        if not found[symbol][1] and _calls_a_trap(symbol, found, calls, at_address, set()):
            found[symbol] = (found[symbol][0], True)
    # Section labels such as <.text> mark padding (s_code_end); list them only if they hold the
    # instruction.
    return {s: v for s, v in found.items() if v[0] or not (s == "" or s.startswith("."))}


_ADDRESS = re.compile(r"//\s*([0-9A-Fa-f]+):")
_PAIR = re.compile(r"^s\[(\d+):(\d+)\]$")


def _address_of(line: str) -> int | None:
    match = _ADDRESS.search(line)
    return int(match.group(1), 16) if match else None


def _number(text: str) -> int | None:
    try:
        return int(text, 0)
    except ValueError:
        return None


def _follow_call(
    words: list[str], address: int | None, pc: dict[str, int], calls: set[int]
) -> None:
    """Track s_getpc_b64 + s_add_u32/s_addc_u32 + s_swappc_b64: the address a function calls."""
    mnemonic, operands = words[0], words[1:]
    if mnemonic == "s_getpc_b64" and operands and address is not None:
        pc[operands[0]] = address + 4  # the address of the next instruction
    elif mnemonic in ("s_add_u32", "s_addc_u32") and len(operands) == 3:
        for pair, base in list(pc.items()):
            low, high = (f"s{n}" for n in _PAIR.match(pair).groups())  # type: ignore[union-attr]
            value = _number(operands[2])
            if value is None:
                continue
            if mnemonic == "s_add_u32" and operands[0] == low == operands[1]:
                pc[pair] = base + (value if value < 2**31 else value - 2**32)
            # s_addc_u32 adds the high word, only the sign for offsets within +-2 GiB: the low
            # word, read as signed above, already gives it.
    elif mnemonic == "s_swappc_b64" and len(operands) == 2 and operands[1] in pc:
        calls.add(pc[operands[1]])


def _calls_a_trap(
    symbol: str,
    found: dict[str, tuple[int, bool]],
    calls: dict[str, set[int]],
    at_address: dict[int, str],
    seen: set[str],
) -> bool:
    seen.add(symbol)
    for target in calls.get(symbol, ()):
        callee = at_address.get(target)
        if callee is None or callee in seen:
            continue
        if found.get(callee, (0, False))[1] or _calls_a_trap(
            callee, found, calls, at_address, seen
        ):
            return True
    return False


def fa_vec_kernel(demangled: str) -> FaVecKernel | None:
    match = _FA_VEC.search(demangled)
    if not match:
        return None
    k, v = int(match["k"]), int(match["v"])
    return FaVecKernel(
        int(match["d"]),
        int(match["ncols"]),
        GGML_TYPE_NAMES.get(k, f"type{k}"),
        GGML_TYPE_NAMES.get(v, f"type{v}"),
        match["softcap"] == "true",
        int(match["heads"] or 1),
        match["long_kv"] == "true",
        tuple(m for m in match["more"].split(", ") if m),
    )


def is_int8_k(pair: str) -> bool:
    """'q8_0-f16' names K first: an int8-K instance; any other K is a control."""
    return pair.split("-")[0] == INT8_K_TYPE


def build_report(
    *,
    version: str,
    sdist_sha256: str,
    toolchain: list[str],
    flags: list[str],
    targets: list[str],
    instance_files: dict[str, str],
    kernels: dict[str, dict[str, list[KernelCount]]],
    instruction: str = INSTRUCTION,
    command: str = "python -m kernels isa-proof",
    roles: dict[str, str] | None = None,
) -> dict:
    """The report: what was compiled from what, each kernel's count, and the verdict.

    `roles` overrides the role a pair's name implies ("int8-K" for K=q8_0, else "control"); a
    role other than "control" only has its q8_0-K kernels judged.
    """
    roles = roles or {}
    report: dict[str, object] = {
        "about": f"Count of {instruction} per GPU kernel of llama.cpp's Flash Attention vector "
        f"kernel instances. Generated by `{command}`; do not edit.",
        "instruction": instruction,
        "llama_cpp_python": version,
        "sdist_sha256": sdist_sha256,
        "toolchain": toolchain,
        "compiler_flags": flags,
        "targets": targets,
        "instances": {
            pair: {
                "file": path,
                "role": roles.get(pair) or ("int8-K" if is_int8_k(pair) else "control"),
            }
            for pair, path in instance_files.items()
        },
        "kernels": {
            target: {pair: [asdict(k) for k in per_pair[pair]] for pair in instance_files}
            for target, per_pair in kernels.items()
        },
    }
    found = violations(report)
    report["ok"] = not found
    report["violations"] = found
    return report


def violations(report: dict) -> list[str]:
    """Each way the report contradicts the int8-K claim, one sentence each; empty when it holds.

    Every flash_attn_ext_vec kernel with K=q8_0 must hold the instruction, except the stubs
    llama.cpp deliberately leaves empty (and only if they really are stubs, i.e. trap); every
    kernel of a control instance, stub or not, must hold none.
    """
    found = []
    instruction = report["instruction"]
    for target in report["targets"]:
        for pair, instance in report["instances"].items():
            entries = report["kernels"].get(target, {}).get(pair)
            if entries is None:
                found.append(f"{target} {pair}: no disassembly was read.")
                continue
            k_type, v_type = pair.split("-")
            fa = [(e, k) for e in entries if (k := fa_vec_kernel(e["demangled"]))]
            if not any((k.k_type, k.v_type) == (k_type, v_type) for _, k in fa):
                found.append(
                    f"{target} {pair}: no flash_attn_ext_vec kernel for K={k_type}, V={v_type}."
                )
            where = f"{target} {pair}"
            if instance["role"] == "control":
                found += [
                    f"{where}: control kernel {_short(e)} has {e['count']} {instruction}."
                    for e in entries
                    if e["count"]
                ]
                continue
            for e, k in fa:
                if k.k_type != INT8_K_TYPE:
                    continue
                if e["traps"] and not k.skipped_by_llama_cpp:
                    found.append(
                        f"{where}: kernel {_short(e)} traps though llama.cpp does not skip it."
                    )
                elif e["count"] == 0 and not (e["traps"] and k.skipped_by_llama_cpp):
                    found.append(f"{where}: int8-K kernel {_short(e)} has no {instruction}.")
    return found


def _short(entry: dict) -> str:
    kernel = fa_vec_kernel(entry["demangled"])
    if kernel:
        return f"flash_attn_ext_vec {kernel.label} K={kernel.k_type} V={kernel.v_type}"
    return entry["demangled"].split("(")[0].removeprefix("void ")


def same_counts(a: list[dict], b: list[dict]) -> bool:
    return [(e["symbol"], e["count"], e["traps"]) for e in a] == [
        (e["symbol"], e["count"], e["traps"]) for e in b
    ]


def write_json(report: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


_PAGE = """\
# The int8-K dot product in the machine code (RDNA3 / RDNA3.5)

<!-- Generated by `python -m kernels isa-proof` from {json_name}; do not edit. -->

Generated by `python -m kernels isa-proof` from [{json_name}]({json_name}), which lists every
kernel symbol, its demangled name and its count. `tests/kernels/test_isa_proof.py` redoes the
proof on every run and fails when this page or the JSON fall out of step with it.

## What is counted, and why it proves the int8-K path

`{instruction}` is an RDNA3 vector instruction: it reads two 32-bit registers as four 8-bit
integers each, multiplies them pairwise and adds the four products to a 32-bit accumulator, in one
step per lane. `iu8` says each byte operand may be signed or unsigned; the `neg_lo:[1,1,0]` the
disassembler prints beside it marks both as signed.

When K is cached as q8_0, llama.cpp's vector Flash Attention kernel (the one decode runs)
quantizes the query to 8 bits once, multiplies it with the cached 8-bit K four bytes at a time
through `ggml_cuda_dp4a` (`ggml/src/ggml-cuda/common.cuh`), and applies the two blocks' scales to
the integer sum afterwards. On RDNA3 (and RDNA4) that function is
`__builtin_amdgcn_sudot4(true, a, true, b, c, false)`, a builtin that compiles to exactly this
instruction. Where the instruction does not exist the same function falls back to byte multiplies
and adds, and an f16 K is multiplied in half precision (`v_dot2_f32_f16` in the control's machine
code), so the instruction has no other reason to be in these kernels.

So the instruction present in every q8_0-K kernel and absent from every kernel of the f16-K/f16-V
control shows, in the code the GPU would run, that the q8_0 K cache is consumed by integer dot
products on these targets rather than converted to f16 first. It says nothing about whether an
installed build contains these kernels (`GGML_CUDA_FA_QUANTS` decides that; `python -m kernels
verify` checks it), nor about speed. The kernels are compiled from the llama-cpp-python
{version} source with Debian 13's hipcc (HIP 5.7, clang 17), not the ROCm 6.1+ compiler
llama.cpp's CMake build asks for; the builtin is this one instruction in either, though the
counts may differ.

## Counts

Source: llama-cpp-python {version} sdist, sha256 `{sha}`, with KV Studio's kernel patches
({kernel}: kernels/patches, applied as `python -m kernels build` and `package` do).
Toolchain: {toolchain}.

Verdict: **{verdict}**

{table}

A stub is a kernel llama.cpp compiles empty on purpose: `fattn-vec.cuh` builds the logit-softcap
variants only for head sizes 128 and 256, and the others print an error and trap (`s_trap` in the
machine code). A stub may lack the instruction only if it matches that rule and really traps.
{per_kernel}
## How it is run

`python -m kernels isa-proof` makes (once per machine, about a minute) a Debian 13 root with
`hipcc` through `scripts/hip_root.sh`, unpacks llama.cpp from the pinned sdist, compiles each
instance file named above for all targets in one `hipcc` call, unbundles each target's code object
from the fat binary and counts the instruction per function label of `llvm-objdump -d`.
Flags: `{flags}`.

Compiled objects are cached inside that root, keyed by the sdist's sha256, the instance, the
targets, the flags and the toolchain's package versions: compiling all three instances takes
minutes on two cores, while a cached run only disassembles (seconds). A key cannot see a damaged
or hand-made object, so the test also compiles the q8_0-f16 instance for gfx1100 afresh on every
run and requires its per-kernel counts to equal the cached ones. Measured on a shared 2-core
machine: the root from nothing in about a minute, 30-45 s per instance for five targets, 8-13 s for
the fresh single-target compile; the whole test file took 3.6 minutes from nothing (root, sdist
download and all) and 15-35 s cached.

The same proof for NVIDIA (`IDP.4A` in sm_90 machine code, recorded on an H200) is in
[int8k-isa-sm90.md](int8k-isa-sm90.md).
"""


def count_tables(report: dict) -> tuple[str, str]:
    """The summary table (one row per target and instance) and the per-kernel tables of the
    int8-K instances, in Markdown; each docs page places them in its own text."""
    targets = report["targets"]
    instruction = report["instruction"]
    rows = [
        (
            "| target | K-V instance | role | flash_attn_ext_vec kernels "
            f"| with {instruction} | stubs | {instruction} per kernel, stubs aside "
            "| total in the file |"
        ),
        "|---|---|---|---|---|---|---|---|",
    ]
    for target in targets:
        for pair, instance in report["instances"].items():
            entries = report["kernels"][target][pair]
            fa = [e for e in entries if fa_vec_kernel(e["demangled"])]
            real = [e["count"] for e in fa if not e["traps"]]
            spread = f"{min(real)}-{max(real)}" if real else "-"
            with_it = sum(1 for e in fa if e["count"])
            total = sum(e["count"] for e in entries)
            rows.append(
                f"| {target} | {pair} | {instance['role']} | {len(fa)} | {with_it} "
                f"| {len(fa) - len(real)} | {spread} | {total} |"
            )
    per_kernel = []
    for pair, instance in report["instances"].items():
        if instance["role"] != "int8-K":
            continue
        per_kernel += [
            "",
            f"Per kernel, {pair} (`flash_attn_ext_vec<D, ncols, K, V, softcap>`):",
            "",
        ]
        per_kernel.append("| kernel | " + " | ".join(targets) + " |")
        per_kernel.append("|---|" + "---|" * len(targets))
        cells: dict[str, dict[str, str]] = {}
        for target in targets:
            for e in report["kernels"][target][pair]:
                kernel = fa_vec_kernel(e["demangled"])
                if kernel:
                    cell = f"{e['count']} (stub)" if e["traps"] else str(e["count"])
                    cells.setdefault(kernel.label, {})[target] = cell
        for label, per_target in cells.items():
            per_kernel.append(
                f"| {label} | " + " | ".join(per_target.get(t, "-") for t in targets) + " |"
            )
    return "\n".join(rows), "\n".join(per_kernel) + "\n"


def verdict_text(report: dict) -> str:
    return "pass" if report["ok"] else "FAIL: " + " ".join(report["violations"])


def render_markdown(report: dict, json_name: str = "int8k-isa-report.json") -> str:
    """The docs page: what the instruction proves, then the counts, all rendered from the report."""
    table, per_kernel = count_tables(report)
    return _PAGE.format(
        json_name=json_name,
        instruction=report["instruction"],
        version=report["llama_cpp_python"],
        sha=report["sdist_sha256"],
        kernel=report.get("kernel", "upstream"),
        toolchain=", ".join(report["toolchain"]),
        verdict=verdict_text(report),
        table=table,
        per_kernel=per_kernel,
        flags=" ".join(report["compiler_flags"]),
    )
