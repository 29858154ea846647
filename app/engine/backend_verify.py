"""Verify one installed backend: its files, that it loads, and what it says about int8-K.

The verdict a user sees (CLI `kvstudio backend verify`, the Backends panel):
- every file matches the manifest's sha256 (a changed byte is a failure);
- the libraries load in a child process, and it is the package's own libllama that loaded;
- for a CUDA/HIP build: the Flash Attention pairs llama.cpp reports (FA_QUANTS) are the ones the
  manifest names and include K=q8_0/V=f16, and the int8 dot instruction counts recorded in the
  manifest when the package was built show the instruction in every q8_0-K kernel and none in
  the f16 control (to recount them from the library itself, in a source checkout:
  `python -m kernels isa-count <library>`; the app never imports kernels/);
- for a CPU build: said plainly, no GPU int8-K kernel is involved.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.backends.manifest import BadPackageError, check_files
from app.backends.store import BackendStore, InstalledBackend
from app.engine.backend_probe import ProbeResult, probe
from app.kv.kv_types import DEFAULT_KV_MODE, FP16_KV_MODE

INT8_K_PAIR = DEFAULT_KV_MODE.pair
CONTROL_PAIR = FP16_KV_MODE.pair


@dataclass
class VerifyResult:
    backend: InstalledBackend
    probe: ProbeResult | None = None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    counts_source: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def gpu(self) -> bool:
        return bool(self.probe and self.probe.gpu_devices)

    def lines(self) -> list[str]:
        manifest = self.backend.manifest
        out = [f"backend: {self.backend.name}"]
        if manifest is not None:
            out.append(
                f"  built from llama-cpp-python {manifest.llama_cpp_python} (ggml "
                f"{manifest.ggml_version}), {manifest.platform}"
            )
            if manifest.gpu_targets:
                out.append(f"  GPU targets: {', '.join(manifest.gpu_targets)}")
            if manifest.build.get("note"):
                out.append(f"  note: {manifest.build['note']}")
        if self.probe is not None:
            out.append(f"  loads: {self.probe.library}")
            out.append(
                f"  llama.cpp {self.probe.llama_cpp}; devices: {'; '.join(self.probe.devices)}"
            )
            pairs = self.probe.build.fa_pairs
            if pairs is not None:
                out.append(f"  Flash Attention K-V pairs compiled: {', '.join(pairs)}")
        for target, per in sorted(self.counts.items()):
            text = ", ".join(f"{pair} {n}" for pair, n in sorted(per.items()))
            out.append(f"  int8 dot instructions in FA kernels, {target}: {text}")
        if self.counts_source:
            out.append(f"  (counts {self.counts_source})")
        out += [f"  {note}" for note in self.notes]
        out += [f"  problem: {p}" for p in self.problems]
        out.append("  verdict: " + ("verified" if self.ok else "NOT usable"))
        return out


def verify(store: BackendStore, name: str) -> VerifyResult:
    """Check `name` fully."""
    backend = store.get(name)
    result = VerifyResult(backend)
    if backend.problem:
        result.problems.append(backend.problem)
        return result
    if backend.folder is not None and backend.manifest is not None:
        try:
            check_files(backend.folder, backend.manifest)
        except BadPackageError as error:
            result.problems.append(str(error))
            return result
    try:
        result.probe = probe(backend.folder)
    except BadPackageError as error:
        result.problems.append(str(error))
        return result
    judge_loaded(result, result.probe)
    return result


def judge_loaded(result: VerifyResult, loaded: ProbeResult) -> None:
    """The verdict once the backend has loaded: what it found and what its kernels hold."""
    backend = result.backend
    build = loaded.build
    manifest = backend.manifest
    gpu_build = bool(build.gpu_backends or (manifest and manifest.name != "cpu"))
    if not gpu_build:
        result.notes.append(
            "CPU build: no GPU int8-K kernel is involved; the CPU backend runs every K/V pair "
            "(K=q8_0 included) without build options."
        )
        return
    if not loaded.gpu_devices:
        # A GPU build that finds no GPU (or, for Vulkan, only a software device it skips unless
        # GGML_VK_VISIBLE_DEVICES names it) runs every layer on the CPU without a warning.
        result.problems.append(
            f"the {backend.name} backend found no GPU device here, so llama.cpp would run "
            "everything on the CPU"
        )
        return
    result.notes.append(f"GPU devices found: {', '.join(loaded.gpu_devices)}")
    if build.fa_pairs is not None:
        if (
            manifest is not None
            and manifest.fa_pairs
            and set(manifest.fa_pairs) != set(build.fa_pairs)
        ):
            result.problems.append(
                f"llama.cpp reports FA pairs {','.join(build.fa_pairs)}, the manifest names "
                f"{','.join(manifest.fa_pairs)}"
            )
        if not build.has_fa_pair(DEFAULT_KV_MODE):
            result.problems.append(
                "this build has no K=q8_0/V=f16 Flash Attention kernel: int8-K would run through "
                "llama.cpp's slow conversion to f16"
            )
    else:
        result.notes.append(
            "this build takes every K/V pair without a compiled pair list (Vulkan); its int8 "
            "dot instructions are not counted (only CUDA and HIP libraries are read)"
        )
    if manifest is not None and manifest.instruction_counts:
        result.counts = manifest.instruction_counts
        result.counts_source = "recorded in the manifest when the package was built"
    for target, per in result.counts.items():
        if per.get(INT8_K_PAIR, 0) <= 0:
            result.problems.append(
                f"no int8 dot instruction in the {INT8_K_PAIR} kernels for {target}"
            )
        if per.get(CONTROL_PAIR, 0) > 0:
            result.problems.append(
                f"the {CONTROL_PAIR} control has int8 dot instructions on {target}"
            )
