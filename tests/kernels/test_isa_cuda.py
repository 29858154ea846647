"""The int8-K path in NVIDIA machine code: `python -m kernels isa-proof --cuda`, `isa-count`, and
the SASS parser on a real listing from the H200.

docs/int8k-isa-sm90.json was recorded on an H200 (nvcc 13.0 with the toolkit's cuBLAS header).
Here the same three instances are compiled with this machine's nvcc for sm_90 (cuobjdump and
nvdisasm come from PyPI into the cache when missing; kernels/cublas_stub stands in for cuBLAS's
header) and every kernel's count must equal the record. The first run compiles all three
(40-80 s on 2 cores); later runs reuse cached objects and compile one afresh. Where nvcc or the
tools cannot be had the tests fail with the reason: the proof is the point, so it is never skipped.
"""

from __future__ import annotations

import copy
import json
import lzma
import struct
import subprocess
import sys
import zlib
from dataclasses import asdict
from pathlib import Path

import pytest

from kernels import cuda_tools, hip_fatbin, isa_cuda, isa_proof, isa_verdict, sass
from kernels.isa_cuda_page import render_cuda_markdown
from kernels.isa_report import KernelCount, fa_vec_kernel, same_counts, violations
from kernels.variants import FA_PAIRS, LLAMA_CPP_PYTHON_VERSION
from tests.prebuilt import CUDA_REPORT, compiled_in_this_run, prebuilt, run_isa_proof

ROOT = Path(__file__).resolve().parents[2]
DOCS_JSON = ROOT / "docs" / "int8k-isa-sm90.json"
DOCS_TABLE = ROOT / "docs" / "int8k-isa-sm90.md"
RDNA3_JSON = ROOT / "docs" / "int8k-isa-report.json"
# An excerpt of `cuobjdump -sass` of the q8_0-f16 instance, as the H200 printed it (cuobjdump 13.0):
# the listing's header, a trapping softcap stub, flash_attn_mask_to_KV_max<1> and the whole
# flash_attn_ext_vec<64, 1, q8_0, f16, false>.
H200_EXCERPT = Path(__file__).parent / "fixtures" / "h200-q8_0-f16-sm90-excerpt.sass.xz"
REGENERATE = "regenerate on a GPU machine with scripts/isa_sm90_run.sh (docs/gpu-reference-run.md)"

pytestmark = pytest.mark.timeout(900)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kernels", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture(scope="module")
def report_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What `python -m kernels isa-proof --cuda` writes here (cached objects where still valid):
    scripts/test_builds.py's report when it ran just before pytest."""
    report = prebuilt(CUDA_REPORT)
    if report is None:
        report = tmp_path_factory.mktemp("isa-cuda") / CUDA_REPORT
        if (failure := run_isa_proof(report, "--cuda")) is not None:
            pytest.fail(failure, pytrace=False)
    return report


@pytest.fixture(scope="module")
def report(report_file: Path) -> dict:
    return json.loads(report_file.read_text())


@pytest.fixture(scope="module")
def docs() -> dict:
    return json.loads(DOCS_JSON.read_text())


def test_the_record_is_the_h200s_sm90_compile(docs: dict) -> None:
    assert docs["machine"].startswith("NVIDIA H200"), docs["machine"]
    assert docs["targets"] == ["sm_90"] and docs["instruction"] == "IDP.4A"
    assert list(docs["instances"]) == list(FA_PAIRS)
    assert docs["llama_cpp_python"] == LLAMA_CPP_PYTHON_VERSION
    assert "cublas_v2.h from the CUDA toolkit" in docs["toolchain"]
    assert docs["ok"] is True and violations(docs) == []


def test_this_machines_compile_gives_the_recorded_counts(report: dict, docs: dict) -> None:
    """Same sources (hash of the files compiled), same flags, every kernel's count the same."""
    for key in ("llama_cpp_python", "sources_sha256", "compiler_flags", "targets", "instances"):
        assert report[key] == docs[key], (
            f"{key} differs from docs/int8k-isa-sm90.json: {REGENERATE}"
        )
    for pair in FA_PAIRS:
        assert same_counts(report["kernels"]["sm_90"][pair], docs["kernels"]["sm_90"][pair]), pair
    assert report["ok"] is True and report["violations"] == []


def test_every_q8_0_kernel_has_idp4a_and_the_control_none(docs: dict) -> None:
    for pair in FA_PAIRS:
        fa = [
            (e, k) for e in docs["kernels"]["sm_90"][pair] if (k := fa_vec_kernel(e["demangled"]))
        ]
        assert len(fa) == 12, pair  # D 64/128/256 x ncols 1/2 x softcap
        for e, k in fa:
            if pair == "f16-f16":
                assert e["count"] == 0, k.label
            elif k.skipped_by_llama_cpp:
                assert e["traps"] and e["count"] == 0, k.label
            else:
                assert not e["traps"] and e["count"] >= 16, k.label
    totals = {p: sum(e["count"] for e in docs["kernels"]["sm_90"][p]) for p in FA_PAIRS}
    assert totals == {"q8_0-f16": 624, "q8_0-q8_0": 624, "f16-f16": 0}


def test_the_docs_page_is_rendered_from_the_record(docs: dict) -> None:
    render = "render it with `python -m kernels isa-proof --cuda --render`"
    assert DOCS_TABLE.read_text() == render_cuda_markdown(docs), render


def test_a_fresh_compile_matches_the_cached_objects(report: dict, report_file: Path) -> None:
    """Compiled now, never cached: a stale or damaged object cache cannot pass for the real
    thing. When this run's proof compiled the instance itself (a fresh machine), its counts
    already are a fresh compile of these sources, and a second compile would prove nothing."""
    recorded = report["kernels"]["sm_90"]["q8_0-f16"]
    if "q8_0-f16" in compiled_in_this_run(report_file):
        fresh = recorded
    else:
        try:
            counts = isa_cuda.compile_fresh("q8_0-f16", log=lambda line: None)
        except isa_proof.IsaProofError as error:
            pytest.fail(str(error), pytrace=False)
        fresh = [asdict(k) for k in counts]
    assert same_counts(fresh, recorded)
    assert sum(k["count"] for k in fresh) == 624


def test_the_judge_fails_a_q8_0_kernel_without_idp4a_and_a_control_with_it(docs: dict) -> None:
    bad = copy.deepcopy(docs)
    entry = next(e for e in bad["kernels"]["sm_90"]["q8_0-q8_0"] if e["count"])
    entry["count"] = 0
    label = fa_vec_kernel(entry["demangled"])
    assert label is not None
    assert violations(bad) == [
        f"sm_90 q8_0-q8_0: int8-K kernel flash_attn_ext_vec {label.label} K=q8_0 V=q8_0 "
        "has no IDP.4A."
    ]
    control = copy.deepcopy(docs)
    control["instances"]["q8_0-f16"]["role"] = "control"
    assert len(violations(control)) == 10  # each q8_0-f16 kernel that holds it


# The parser, on the H200's own output.


def _excerpt() -> str:
    with lzma.open(H200_EXCERPT, "rt") as f:
        return f.read()


def test_the_parser_reads_the_h200_listing(docs: dict) -> None:
    functions = sass.parse(_excerpt())
    assert [(f.arch, f.count, f.traps) for f in functions] == [
        ("sm_90", 0, True),
        ("sm_90", 0, False),
        ("sm_90", 16, False),
    ]
    recorded = {e["symbol"]: e for e in docs["kernels"]["sm_90"]["q8_0-f16"]}
    for f in functions:  # each one as the record has it
        assert (recorded[f.symbol]["count"], recorded[f.symbol]["traps"]) == (f.count, f.traps)


def test_the_parser_follows_the_instructions_not_the_file(docs: dict) -> None:
    text = _excerpt()
    one_less = text.replace("IDP.4A.S8.S8", "IMAD.MOV.U32", 1)
    assert [f.count for f in sass.parse(one_less)] == [0, 0, 15]
    no_trap = text.replace("BPT.TRAP", "NOP", 1)
    assert [f.traps for f in sass.parse(no_trap)] == [False, False, False]


@pytest.mark.parametrize(
    ("demangled", "label"),
    [
        # upstream, 0003's GQA heads, 0007's long-KV flag, and a candidate's later argument (run
        # 34's H: its V conversion variant), which once made every such kernel go uncounted
        (
            "void flash_attn_ext_vec<64, 1, (ggml_type)8, (ggml_type)1, false>(char const*)",
            "D=64 ncols=1",
        ),
        (
            "void flash_attn_ext_vec<256, 1, 2, (ggml_type)8, (ggml_type)1, true>(char const*)",
            "D=256 ncols=1 heads=2 softcap",
        ),
        (
            "void flash_attn_ext_vec<128, 1, 4, (ggml_type)8, (ggml_type)8, false, true>(int)",
            "D=128 ncols=1 heads=4 long-kv",
        ),
        (
            "void flash_attn_ext_vec<128, 1, 4, (ggml_type)8, (ggml_type)8, false, true, 2>(int)",
            "D=128 ncols=1 heads=4 long-kv 2",
        ),
    ],
)
def test_a_vector_kernel_is_known_by_its_template_arguments(demangled: str, label: str) -> None:
    kernel = fa_vec_kernel(demangled)
    assert kernel is not None and kernel.label == label
    assert (kernel.k_type, kernel.v_type) in (("q8_0", "f16"), ("q8_0", "q8_0"))


def test_the_parser_counts_mnemonics_only() -> None:
    listing = "\n".join(
        [
            "\tcode for sm_86",
            "        /*0000*/       IDP.4A.U8.S8 R1, R2, R3, RZ ;   /* 0x0000000302017226 */",
            "\t\tFunction : _Z6IDP_4Av",
            "        /*0000*/   @!P0 IDP.4A.S8.S8 R4, R5, R6, R4 ;   /* 0x0000000605048226 */",
            "                                                  /* 0x000fe20000000604 */",
            "        /*0010*/               @UP1 IDP.2A.LO.S16.S8 R4, R5, R6, R4 ;  /* IDP.4A */",
            "        /*0020*/                   IMAD R1, R2, R3, RZ ;  // IDP.4A in a comment",
            "\t\tFunction : _Z1bv",
            "        /*0000*/                   BPT.TRAP 0x1 ;",
            "\tcode for sm_52",
            "\t\tFunction : _Z1bv",
            "        /*0000*/                   EXIT ;",
        ]
    )
    assert [(f.arch, f.symbol, f.count, f.traps) for f in sass.parse(listing)] == [
        ("sm_86", "", 1, False),  # code before the first function is not lost
        ("sm_86", "_Z6IDP_4Av", 1, False),
        ("sm_86", "_Z1bv", 0, True),
        ("sm_52", "_Z1bv", 0, False),
    ]
    assert sass.has_dp4a("sm_61") and sass.has_dp4a("sm_90a") and not sass.has_dp4a("sm_60")


# The installed-library count: a libggml-cuda.so linked here from the compiled instances.


@pytest.fixture(scope="module")
def cuda_objects(report: dict) -> dict[str, Path]:
    """The objects `report` was read from, by the cache's own key (the cache may hold others:
    other sources or toolchains, compiled later)."""
    folder = isa_proof.cache_home() / "cuda" / "objects"
    sha, tools = report["sdist_sha256"], report["toolchain"]
    found = {p: folder / f"{isa_cuda.object_key(sha, p, 'sm_90', tools)}.o" for p in FA_PAIRS}
    assert all(path.is_file() for path in found.values()), found
    return found


def _by_symbol(entries: list[dict]) -> list[dict]:
    return sorted(entries, key=lambda e: e["symbol"])


def _link(objects: list[Path], folder: Path) -> Path:
    nvcc = cuda_tools.find("nvcc")
    assert nvcc
    lib = folder / "libggml-cuda.so"
    cmd = [nvcc, "-shared", "-arch=sm_90", "-o", str(lib), *map(str, objects)]
    subprocess.run(cmd, check=True, capture_output=True)
    return lib


def test_isa_count_reads_the_library(
    cuda_objects: dict[str, Path], report: dict, tmp_path: Path
) -> None:
    # The default pair and the control: each object linked is disassembled twice below (~3.5 s).
    lib = _link([cuda_objects["q8_0-f16"], cuda_objects["f16-f16"]], tmp_path)
    result = _run("isa-count", str(lib), "--kv", "q8_0/f16", "--json")
    assert result.returncode == 0, result.stderr
    counted = json.loads(result.stdout)
    (arch_report,) = counted["reports"]
    assert arch_report["targets"] == ["sm_90"] and counted["problems"] == []
    for pair in ("q8_0-f16", "f16-f16"):
        compiled = [e for e in report["kernels"]["sm_90"][pair] if fa_vec_kernel(e["demangled"])]
        assert same_counts(_by_symbol(compiled), _by_symbol(arch_report["kernels"]["sm_90"][pair]))
    text = _run("isa-count", str(lib)).stdout
    assert "sm_90 q8_0-f16 (int8-K): 12 flash_attn_ext_vec kernels, 10 with IDP.4A" in text
    assert "sm_90 f16-f16 (control): 12 flash_attn_ext_vec kernels, 0 with IDP.4A" in text


def test_isa_count_fails_when_the_asked_pair_is_not_in_the_library(
    cuda_objects: dict[str, Path], tmp_path: Path
) -> None:
    lib = _link([cuda_objects["f16-f16"]], tmp_path)
    result = _run("isa-count", str(lib), "--kv", "q8_0/f16")
    assert result.returncode == 1
    assert "sm_90 q8_0-f16: no flash_attn_ext_vec kernel for K=q8_0, V=f16." in result.stderr


def test_isa_count_names_the_missing_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kernels.__main__ import main

    lib = tmp_path / "libggml-cuda.so"
    lib.write_bytes(b"\x7fELF")
    real_find = cuda_tools.find
    # A machine without the CUDA toolkit's binary tools (c++filt is binutils', still there).
    monkeypatch.setattr(
        cuda_tools,
        "find",
        lambda name: None if name in ("cuobjdump", "nvdisasm") else real_find(name),
    )
    assert main(["isa-count", str(lib)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "kernels: cuobjdump and nvdisasm are missing, so IDP.4A was not counted (the CUDA toolkit "
        "has them, or `pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm`).\n"
    )


def test_verify_fails_on_a_q8_0_kernel_without_the_instruction() -> None:
    from kernels.verify import VerifyReport, add_isa, format_report, verdict

    def kernel(k: int, count: int) -> KernelCount:
        name = f"void flash_attn_ext_vec<128, 1, (ggml_type){k}, (ggml_type)1, false>(char const*)"
        return KernelCount(f"_Z{k}", name, count, False)

    def isa(q8_count: int) -> isa_verdict.LibraryIsa:
        kernels = {"sm_90": [kernel(8, q8_count), kernel(1, 0)]}
        return isa_verdict.judge(
            Path("libggml-cuda.so"),
            "0.3.36",
            "cuobjdump -sass",
            {"sm_90": "IDP.4A"},
            kernels,
            "q8_0-f16",
        )

    def clean() -> VerifyReport:
        return VerifyReport(
            mode="q8_0/f16",
            backends=("CUDA", "CPU"),
            fa_pairs=("q8_0-f16", "f16-f16"),
            compiled=True,
            k_cache_types=["q8_0"],
            kv_devices=["CUDA0"],
            tokens=16,
        )

    good = clean()
    add_isa(good, isa(32))
    assert good.verified
    assert (
        "  sm_90 q8_0-f16 (int8-K): 1 flash_attn_ext_vec kernels, 1 with IDP.4A, 32-32 each; "
        "32 in all" in format_report(good)
    )
    bad = clean()
    add_isa(bad, isa(0))
    assert not bad.ok and verdict(bad) == "RESULT: NOT verified"
    assert (
        "sm_90 q8_0-f16: int8-K kernel flash_attn_ext_vec D=128 ncols=1 K=q8_0 V=f16 has no IDP.4A."
        in format_report(bad)
    )
    missing = clean()
    add_isa(
        missing,
        isa_verdict.LibraryIsa(
            "libggml-cuda.so", "cuobjdump -sass", missing="cuobjdump is missing."
        ),
    )
    assert (
        missing.verified
        and "not counted in libggml-cuda.so: cuobjdump is missing." in format_report(missing)
    )


# HIP: a libggml-hip.so-shaped file whose .hip_fatbin holds the RDNA3 proof's bundles, one of them
# compressed the way ROCm 6.2+'s clang does (a CCOB header, zlib).


def _rdna3_fatbins() -> dict[str, bytes]:
    try:
        root = isa_proof.ensure_root(log=lambda line: None)
        sha = isa_proof.sha256_of(isa_proof.ensure_sdist(log=lambda line: None))
        source = isa_proof.source_key(sha, patched=True)  # the RDNA3 proof compiles our kernels
        tools = isa_proof.toolchain(root)
        objects = {
            p: root
            / "kvstudio"
            / "objects"
            / f"{isa_proof.object_key(source, p, isa_proof.DEFAULT_TARGETS, tools)}.o"
            for p in FA_PAIRS
        }
        if not all(o.is_file() for o in objects.values()):
            isa_proof.prove(log=lambda line: None)
    except isa_proof.IsaProofError as error:
        pytest.fail(str(error), pytrace=False)
    sections = {
        p: hip_fatbin.elf_section(o.read_bytes(), ".hip_fatbin") for p, o in objects.items()
    }
    assert all(sections.values())
    return sections  # type: ignore[return-value]


def _ccob(bundle: bytes, method: int = hip_fatbin.ZLIB) -> bytes:
    packed = zlib.compress(bundle, 9)
    return b"CCOB" + struct.pack("<HHIIQ", 2, method, 24 + len(packed), len(bundle), 0) + packed


def _pad(bundle: bytes) -> bytes:
    """Bundles of separate objects start at 4096-byte boundaries in a linked library."""
    return bundle + b"\0" * (-len(bundle) % 4096)


def _hip_library(folder: Path, section: bytes) -> Path:
    lib = folder / "libggml-hip.so"
    (folder / "fatbin").write_bytes(section)
    subprocess.run(
        ["objcopy", "--add-section", f".hip_fatbin={folder / 'fatbin'}", sys.executable, str(lib)],
        check=True,
        capture_output=True,
    )
    return lib


@pytest.mark.slow
def test_isa_count_reads_a_hip_library_of_several_bundles_one_compressed(tmp_path: Path) -> None:
    fatbins = _rdna3_fatbins()
    section = _pad(fatbins["f16-f16"]) + _pad(_ccob(fatbins["q8_0-q8_0"])) + fatbins["q8_0-f16"]
    lib = _hip_library(tmp_path, section)
    assert len(list(hip_fatbin.bundles(section))) == 3
    result = _run("isa-count", str(lib), "--kv", "q8_0/q8_0", "--json")
    assert result.returncode == 0, result.stderr
    counted = json.loads(result.stdout)
    rdna3 = json.loads(RDNA3_JSON.read_text())
    assert [r["targets"][0] for r in counted["reports"]] == rdna3["targets"]
    for r in counted["reports"]:
        (target,) = r["targets"]
        assert r["instruction"] == "v_dot4_i32_iu8"
        for pair in ("q8_0-q8_0", "f16-f16"):
            recorded = [e for e in rdna3["kernels"][target][pair] if fa_vec_kernel(e["demangled"])]
            found = r["kernels"][target][pair]
            assert same_counts(_by_symbol(found), _by_symbol(recorded)), (target, pair)


def test_a_zstd_bundle_without_a_decompressor_names_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("zstandard", "compression", "compression.zstd"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(
        hip_fatbin.FatbinError, match=r"zstd-compressed .*\(pip install zstandard\)\.$"
    ):
        list(hip_fatbin.bundles(_ccob(b"anything", method=hip_fatbin.ZSTD)))


def test_the_int8_dot_instruction_of_each_amd_target() -> None:
    assert hip_fatbin.instruction_for("gfx1100") == "v_dot4_i32_iu8"
    assert hip_fatbin.instruction_for("gfx1201") == "v_dot4_i32_iu8"
    assert hip_fatbin.instruction_for("gfx90a:xnack-") == "v_dot4_i32_i8"
    assert hip_fatbin.instruction_for("gfx1030") == "v_dot4_i32_i8"
    assert hip_fatbin.instruction_for("gfx1010") is None
    assert hip_fatbin.instruction_for("gfx900") is None


def test_bad_arch_is_refused_in_one_sentence() -> None:
    result = _run("isa-proof", "--cuda", "--arch", "sm_52")
    assert result.returncode == 2
    assert (
        result.stderr
        == "kernels: sm_52 has no IDP.4A (it exists from sm_61 on), so there is nothing to prove.\n"
    )
    result = _run("isa-proof", "--cuda", "--arch", "gfx1100")
    assert result.stderr == "kernels: not an NVIDIA GPU architecture (like sm_90): gfx1100.\n"
