"""What the tests of our kernel candidates (patches kept under docs/kernel-log, run on a GPU by the
device script's XPATCH) share: the pinned llama.cpp's sources to apply them on, an emulator of
their kernels built around code cut from the patched sources, and llama.cpp's real decode graph,
every node, to find the node runs a candidate fuses."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from kernels import patch_set
from kernels.isa_proof import ensure_sdist

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "docs" / "kernel-log"
CUDA = "ggml/src/ggml-cuda"
_PREFIX = "llama_cpp_python-0.3.36/vendor/llama.cpp/"
GRAPH = ROOT / "scripts" / "decode_graph_ops.py"


def extract(folder: Path, files: set[str]) -> Path:
    """The pinned llama.cpp's Flash Attention sources and `files` (paths in llama.cpp), under
    folder/llama.cpp."""
    wanted = (f"{_PREFIX}{CUDA}/fattn", *(_PREFIX + name for name in files))
    with tarfile.open(ensure_sdist(log=lambda line: None), "r:gz") as tar:
        members = [m for m in tar if m.name.startswith(wanted)]
        for member in members:
            member.name = member.name[len(_PREFIX) :]
        tar.extractall(folder / "llama.cpp", members=members, filter="data")
    return folder / "llama.cpp"


def sources(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def files_changed_by(llama_cpp: Path, candidate: Path, *beneath: Path) -> set[str]:
    """Apply the seven shipped patches and the candidates `beneath`, then `candidate` as the
    device script's XPATCH applies the last of its list: the files the candidate changes."""
    patch_set.apply(llama_cpp, 7, *beneath)
    before = sources(llama_cpp)
    applied = patch_set.apply(llama_cpp, 0, candidate)
    assert [p.name for p in applied] == [candidate.name.removesuffix(".txt")]
    after = sources(llama_cpp)
    return {name for name in after if after[name] != before[name]}


def build_emulator(probe: Path, folder: Path) -> Path:
    """The probe compiled as C++20 with `folder` (where the kernel code cut from a patched source
    lies) on its include path."""
    compiler = shutil.which("g++") or shutil.which("c++")
    assert compiler, "a C++ compiler (building llama-cpp-python needs one too)"
    program = folder / probe.stem
    subprocess.run(
        [compiler, "-std=c++20", "-O1", "-pthread", f"-I{folder}", "-o", str(program), str(probe)],
        check=True,
    )
    return program


def emulator_with(probe: Path, folder: Path, include: str, code: str) -> Path:
    """build_emulator, with `code` (cut from a patched source) as `include`, the file the probe
    includes."""
    (folder / include).write_text(code)
    return build_emulator(probe, folder)


def run_emulator(program: Path, *args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [program, *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )


def decode_graph(model: Path, kv: str) -> list[dict[str, Any]]:
    """Every node of one decode step of `model` with the K/V cache types `kv`, as
    scripts/decode_graph_ops.py records it from the real llama.cpp (fresh objects each call)."""
    return [json.loads(line) for line in _graph_lines(model, kv)]


@functools.cache
def _graph_lines(model: Path, kv: str) -> tuple[str, ...]:
    # one llama.cpp run per model and mode in a test session: several candidates' tests read the
    # same graphs
    result = subprocess.run(
        [sys.executable, str(GRAPH), str(model), "--kv", kv], cwd=ROOT, capture_output=True,
        text=True, timeout=300, check=False, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return tuple(result.stdout.splitlines())


def overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two nodes of decode_graph lie on common bytes of one backend buffer."""
    return bool(
        a["buffer"] == b["buffer"]
        and a["offset"] < b["offset"] + b["bytes"]
        and b["offset"] < a["offset"] + a["bytes"]
    )


def chains(nodes: list[dict[str, Any]], ops: list[str]) -> list[list[dict[str, Any]]]:
    """Runs of consecutive nodes with these ops, each taking the one before as its first source
    (a product as its second), as ggml_cuda_can_fuse checks them."""
    found = []
    for start in range(len(nodes) - len(ops) + 1):
        run = nodes[start : start + len(ops)]
        if [n["op"] for n in run] != ops:
            continue
        links = [
            run[k]["src"][1 if ops[k] == "MUL_MAT" else 0] == run[k - 1]["i"]
            for k in range(1, len(ops))
        ]
        if all(links):
            found.append(run)
    return found


def products(nodes: list[dict[str, Any]], rotation: str) -> list[dict[str, Any]]:
    """The products with the rotation matrix named `rotation` (attn_inp_k_rot, attn_inp_v_rot)."""
    return [n for n in nodes if n["op"] == "MUL_MAT" and n["src"][0] == rotation]
