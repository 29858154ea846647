"""Our kernel patches (kernels/patches) against the llama.cpp of the pinned llama-cpp-python sdist:
they apply, strictly and all or nothing; GPU builds (pip and packages) get them, CPU builds do
not; and the version a build carries is what a manifest and the Backends page say."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from app.backends.manifest import (
    KERNEL_NOTE,
    BadPackageError,
    built_in_kernel,
    kernel_text,
    parse_manifest,
)
from app.platform.safe_text import safe_text
from kernels import build, package, patch_set
from kernels.isa_proof import ensure_sdist, sha256_of, source_key
from kernels.variants import VARIANTS, custom_variant

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "docs" / "kernel-log"
CUDA = "ggml/src/ggml-cuda"
PREFIX = "llama_cpp_python-0.3.36/vendor/llama.cpp/"


@pytest.fixture(scope="module")
def sdist() -> Path:
    return ensure_sdist(log=lambda line: None)


@pytest.fixture
def llama_cpp(sdist: Path, tmp_path: Path) -> Path:
    """The Flash Attention sources of the pinned llama.cpp, as they come."""
    with tarfile.open(sdist, "r:gz") as tar:
        members = [m for m in tar if m.name.startswith(f"{PREFIX}{CUDA}/fattn")]
        for member in members:
            member.name = member.name[len(PREFIX) :]
        tar.extractall(tmp_path / "llama.cpp", members=members, filter="data")
    return tmp_path / "llama.cpp"


def _sources(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / CUDA).iterdir())}


def test_the_patches_are_numbered_described_and_touch_only_the_fa_kernels() -> None:
    patches = patch_set.load_patches()
    assert [p.number for p in patches] == list(range(1, len(patches) + 1))
    assert len(patches) >= 3
    fa_sources = {f"{CUDA}/{name}" for name in ("fattn-vec.cuh", "fattn-common.cuh")}
    fa_sources |= {f"{CUDA}/fattn-mma-f16.cuh", f"{CUDA}/fattn.cu"}  # 0005: the prompt kernel
    for p in patches:
        assert p.summary.startswith(("CUDA", "CUDA/HIP")), p.name
        assert {f.path for f in p.files} <= fa_sources, p.name
    assert patch_set.kernel_version() == f"kvstudio-fa.{len(patches)}"
    assert patch_set.kernel_version(0) == "upstream"


@pytest.mark.slow
def test_the_patch_set_applies_to_the_pinned_llama_cpp(llama_cpp: Path) -> None:
    before = _sources(llama_cpp)
    applied = patch_set.apply(llama_cpp)
    assert [p.name[:4] for p in applied] == ["0001", "0002", "0003", "0004", "0005", "0006", "0007"]
    vec = (llama_cpp / CUDA / "fattn-vec.cuh").read_text()
    common = (llama_cpp / CUDA / "fattn-common.cuh").read_text()
    mma = (llama_cpp / CUDA / "fattn-mma-f16.cuh").read_text()
    fattn = (llama_cpp / CUDA / "fattn.cu").read_text()
    assert "constexpr int nthreads_KQ_q = (D/4 < 4 ? D/4 : 4);" in vec  # 0001
    assert "__funnelshift_r(words[l], words[l + 1], shift)" in common  # 0002
    assert "template<int D, int ncols1, int ncols2, ggml_type type_K" in vec  # 0003
    assert "D == 256 ? 2 : 4;" in vec and "<D, 1, heads_per_block, type_K, type_V>" in vec  # 0004
    # 0005: the MMA kernel reads a q8_0 K in place, and no f16 scratch of K is reserved for it,
    # when asked for (KVSTUDIO_FA_Q8_0_K_IN_PLACE=1: prompts are slower that way)
    assert "flash_attn_ext_q8_0_load_tile<DKQ, stride_tile_K, swz, nwarps, nbatch_fa," in mma
    assert 'getenv("KVSTUDIO_FA_Q8_0_K_IN_PLACE")' in mma
    assert "launch<DKQ, DV, ncols1, ncols2, true>(ctx, dst)" in mma
    assert "need_f16_K = !ggml_cuda_flash_attn_ext_mma_reads_q8_0_K(" in fattn
    # 0006: on CUDA a q8_0 K block is read in aligned 8-byte loads; HIP keeps 0002's loads
    eight_byte = "const uint2   * w    = (const uint2 *) (addr & ~uintptr_t(7));"
    assert eight_byte in common
    assert common.index("#ifndef GGML_USE_HIP") < common.index(eight_byte)
    # 0007: from 49,152 cells on, one token with 4 q8_0-K heads of 128 runs 3 blocks per SM
    assert "long_kv ? 3 : (ncols2*D > 256 ? 2 : 3))" in vec
    assert 'getenv("KVSTUDIO_FA_VEC_LONG_KV_FROM")' in vec and "(int64_t) 49152" in vec
    changed = {name for name, data in _sources(llama_cpp).items() if data != before[name]}
    assert changed == {"fattn-vec.cuh", "fattn-common.cuh", "fattn-mma-f16.cuh", "fattn.cu"}


@pytest.mark.slow
def test_an_experiment_applies_after_the_set_and_says_so(llama_cpp: Path) -> None:
    """The device scripts' XPATCH: one more patch file after the first N, all or nothing, and the
    version printed is the N's with the experiment's tag."""
    candidate = ROOT / "docs" / "kernel-log" / "2026-12-04-run32-vec-v8-candidate.patch.txt"
    apply = [sys.executable, "-m", "kernels.patch_set", "apply", str(llama_cpp)]
    result = subprocess.run([*apply, "7", str(candidate)], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith(": kernel kvstudio-fa.7+run32-vec-v8-candidate\n")
    vec = (llama_cpp / CUDA / "fattn-vec.cuh").read_text()
    common = (llama_cpp / CUDA / "fattn-common.cuh").read_text()
    assert "(long_kv && type_V == GGML_TYPE_Q8_0 ? 8 : 4)" in vec  # 0007's kernel, changed
    assert "__funnelshift_r(low ? lo.x : lo.y, low ? lo.y : hi.x, sh)" in common
    # Applied twice, the set's first patch no longer matches: refused, nothing written.
    before = _sources(llama_cpp)
    result = subprocess.run([*apply, "7", str(candidate)], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 2 and result.stderr.startswith("kernels: 0001-")
    assert _sources(llama_cpp) == before


@pytest.mark.slow
@pytest.mark.parametrize(
    ("experiment", "changed"),
    [
        ("2026-12-04-run33-4-blocks.patch.txt", {"fattn-vec.cuh"}),
        ("2026-12-04-run33-v-i2fp.patch.txt", {"fattn-common.cuh"}),
        ("2026-12-04-run33-v-i2fp-4-blocks.patch.txt", {"fattn-vec.cuh", "fattn-common.cuh"}),
        ("2026-12-04-run33-mma-k-no-i2f.patch.txt", {"fattn-mma-f16.cuh"}),
        ("2026-12-04-run33-4blocks-kconv.patch.txt", {"fattn-vec.cuh", "fattn-mma-f16.cuh"}),
    ],
)
def test_run_33s_candidates_apply_on_fa7(
    llama_cpp: Path, experiment: str, changed: set[str]
) -> None:
    """What kernel-log M prepared for the next device session applies after the seven patches
    and changes only the files it says, as the device script's XPATCH will apply it."""
    patch_set.apply(llama_cpp, 7)
    fa7 = _sources(llama_cpp)
    applied = patch_set.apply(llama_cpp, 0, RAW / experiment)
    assert [p.name for p in applied] == [experiment.removesuffix(".txt")]
    after = _sources(llama_cpp)
    assert {name for name in after if after[name] != fa7[name]} == changed


@pytest.mark.slow
def test_the_first_n_patches_only(llama_cpp: Path) -> None:
    before = _sources(llama_cpp)
    assert patch_set.apply(llama_cpp, 0) == []
    assert _sources(llama_cpp) == before
    patch_set.apply(llama_cpp, 1)
    vec = (llama_cpp / CUDA / "fattn-vec.cuh").read_text()
    assert "nthreads_KQ_q = (D/4 < 4 ? D/4 : 4)" in vec and "ncols2" not in vec
    assert (llama_cpp / CUDA / "fattn-common.cuh").read_bytes() == before["fattn-common.cuh"]


@pytest.mark.slow
def test_applying_twice_is_refused_and_changes_nothing(llama_cpp: Path) -> None:
    patch_set.apply(llama_cpp)
    patched = _sources(llama_cpp)
    with pytest.raises(patch_set.PatchError) as refused:
        patch_set.apply(llama_cpp)
    assert str(refused.value).startswith("0001-fattn-vec-fewer-threads-per-quantized-row: ")
    assert "already patched, or another llama.cpp version" in str(refused.value)
    assert _sources(llama_cpp) == patched


@pytest.mark.slow
def test_other_sources_are_refused_all_or_nothing(llama_cpp: Path) -> None:
    """0002 no longer matches: nothing is written, not even 0001's change to another file."""
    common = llama_cpp / CUDA / "fattn-common.cuh"
    common.write_text(common.read_text().replace("ggml_cuda_memcpy_1<sizeof(v), 2>", "memcpy"))
    before = _sources(llama_cpp)
    with pytest.raises(patch_set.PatchError, match=r"^0002-.*fattn-common\.cuh around line"):
        patch_set.apply(llama_cpp)
    assert _sources(llama_cpp) == before


@pytest.mark.slow
def test_the_command_line(llama_cpp: Path, tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "kernels.patch_set", *args]
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)

    listed = run("list")
    assert listed.returncode == 0
    assert listed.stdout.splitlines()[0].startswith("0001-fattn-vec-fewer-threads-per-quantized")
    done = run("apply", str(llama_cpp), "2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(": kernel kvstudio-fa.2")
    missing = run("apply", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and missing.stdout == ""
    (line,) = missing.stderr.strip().splitlines()
    assert line.startswith("kernels: 0001-") and line.endswith(f"is not in {tmp_path / 'nowhere'}.")


@pytest.mark.slow
def test_gpu_builds_carry_the_patches_and_cpu_builds_keep_their_sources(
    sdist: Path, tmp_path: Path
) -> None:
    for name in ("cuda", "cuda-hopper", "rocm-rdna3", "rocm-rdna4"):
        assert package.kernel_of(package.cmake_args(VARIANTS[name])) == patch_set.kernel_version()
    for name in ("cpu", "vulkan"):
        assert package.kernel_of(package.cmake_args(VARIANTS[name])) == ""
    # ./quickstart.sh's GPU build: the user's CMAKE_ARGS, as `python -m kernels build custom`
    users = custom_variant("-DGGML_RPC=ON -DGGML_HIP=ON -DGPU_TARGETS=gfx1100;gfx1101")
    assert users.cmake_args[1:] == ("-DGGML_HIP=ON", "-DGPU_TARGETS=gfx1100;gfx1101")
    assert package.kernel_of(users.cmake_args) == patch_set.kernel_version()
    assert package.kernel_of(custom_variant("-DGGML_RPC=ON").cmake_args) == ""
    sha = sha256_of(sdist)
    # The CPU package keeps its source folder (and its cached build); a patched one is apart.
    assert source_key(sha, patched=False) == sha[:16]
    assert source_key(sha, patched=True).startswith(f"{sha[:16]}-{patch_set.kernel_version()}-")

    src = package.unpack_llama_cpp(sdist, sha, tmp_path / "src", patched=True)
    assert "ncols2" in (src / CUDA / "fattn-vec.cuh").read_text()
    folder = build.patched_source(str(sdist), tmp_path / "pip")
    assert (folder / "pyproject.toml").is_file()
    assert "ncols2" in (folder / "vendor" / "llama.cpp" / CUDA / "fattn-vec.cuh").read_text()
    not_an_sdist = tmp_path / "notes.tar.gz"
    not_an_sdist.write_text("hello")
    with pytest.raises(ValueError, match=r"notes\.tar\.gz could not be read as an sdist"):
        build.patched_source(str(not_an_sdist), tmp_path / "pip2")


def _manifest(record: str, **fields: object) -> str:
    """A recorded package's manifest (docs/backend-packages), with some fields changed."""
    raw = json.loads((ROOT / "docs" / "backend-packages" / record).read_text())
    raw.update(fields)
    return json.dumps(raw)


def test_the_manifest_says_which_kernel_the_package_carries() -> None:
    old_rocm = "rocm-rdna3-gfx1100.json"  # recorded before the field: llama.cpp's own kernels
    assert parse_manifest(_manifest(old_rocm)).kernel == "upstream"
    # Both GPU packages rebuilt with patches 0001-0007 (docs/kernel-log.md L): rocm-rdna3 here,
    # cuda-hopper on the H200.
    assert parse_manifest(_manifest("rocm-rdna3.json")).kernel == "kvstudio-fa.7"
    cuda = "cuda-hopper.json"
    assert parse_manifest(_manifest(cuda)).kernel == "kvstudio-fa.7"
    assert parse_manifest(_manifest("vulkan.json")).kernel == ""
    assert parse_manifest(_manifest(cuda, kernel="kvstudio-fa.3")).kernel == "kvstudio-fa.3"
    with pytest.raises(BadPackageError, match=r"^The package's kernel version is not a short"):
        parse_manifest(_manifest(cuda, kernel="<b>3</b>"))
    assert kernel_text("kvstudio-fa.3").startswith("kvstudio-fa.3: llama.cpp's with KV Studio's")
    assert kernel_text("") == "none (no CUDA/HIP kernels in this build)"


def test_the_built_in_backend_says_what_its_build_left(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libggml-cpu.so").write_bytes(b"")
    assert built_in_kernel(lib) == ""  # CPU only: no GPU kernels at all
    (lib / "libggml-cuda.so").write_bytes(b"")
    assert built_in_kernel(lib) == "upstream"  # a plain pip install
    (lib / KERNEL_NOTE).write_text("kvstudio-fa.3\n")
    assert built_in_kernel(lib) == "kvstudio-fa.3"  # `python -m kernels build cuda`


def test_a_build_with_an_experiment_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The device scripts' XPATCH builds: the note `patch_set version N FILE` writes is read back
    as that kernel with the experiment, not as llama.cpp's own (run 32's bench said "upstream")."""
    experiment = RAW / "2026-12-04-run32-vec-v8-candidate-b.patch.txt"
    assert patch_set.main(["version", "7", str(experiment)]) == 0
    note = capsys.readouterr().out
    assert note == "kvstudio-fa.7+run32-vec-v8-candidate-b\n"
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libggml-cuda.so").write_bytes(b"")
    (lib / KERNEL_NOTE).write_text(note)
    assert built_in_kernel(lib) == "kvstudio-fa.7+run32-vec-v8-candidate-b"
    assert kernel_text(built_in_kernel(lib)) == (
        "kvstudio-fa.7 with the experiment run32-vec-v8-candidate-b: KV Studio's kernel patches "
        "and one not shipped"
    )
    assert safe_text(built_in_kernel(lib), 40) == built_in_kernel(lib)  # shown whole in a title


def test_the_rebuilt_rdna3_package_holds_what_the_instruction_proof_counts() -> None:
    """The rocm-rdna3 package built with the patches (counts read from its libggml-hip.so) and the
    instruction proof of the patched instance files (docs/int8k-isa-report.json) agree, target by
    target and pair by pair: 1,200 per q8_0-K pair, as the README and docs/backends.md say."""
    package = json.loads((ROOT / "docs" / "backend-packages" / "rocm-rdna3.json").read_text())
    proof = json.loads((ROOT / "docs" / "int8k-isa-report.json").read_text())
    assert package["kernel"] == proof["kernel"] == patch_set.kernel_version()
    proved = {
        target: {pair: sum(k["count"] for k in kernels) for pair, kernels in pairs.items()}
        for target, pairs in proof["kernels"].items()
    }
    assert package["instruction_counts"] == proved
    assert {n for counts in proved.values() for n in counts.values()} == {0, 1200}
