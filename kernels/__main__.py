"""`python -m kernels ...`: build variants, build, verify, isa-proof (see kernels/__init__.py)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernels.variants import BuildVariant

NOTHING_TO_VERIFY = 3  # exit status: checks passed, but no GPU kernel ran (CPU build)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kernels", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("variants", help="list build variants and their CMAKE_ARGS")
    args = sub.add_parser("cmake-args", help="print one variant's CMAKE_ARGS")
    args.add_argument("variant")
    build = sub.add_parser(
        "build",
        help="pip install llama-cpp-python for a variant (CUDA/HIP ones with kernels/patches)",
    )
    build.add_argument("variant", help="a variant's name, or 'custom' for $CMAKE_ARGS")
    build.add_argument("--source", help="an sdist file or unpacked folder (default: PyPI)")
    build.add_argument("--target", help="install into this folder instead of the environment")
    build.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    verify = sub.add_parser(
        "verify",
        help="check the int8-K FA pair is compiled and used",
        description="Exit status: 0 verified on a GPU backend; 1 a problem was found; "
        "3 no problem, but no GPU kernel was involved (CPU build or no layer on the GPU).",
    )
    verify.add_argument("model", nargs="?", default="starter", help="a .gguf path or 'starter'")
    verify.add_argument("--kv", default="q8_0/f16", help="K/V pair to check (default q8_0/f16)")
    verify.add_argument("--ctx", type=int, default=4096)
    verify.add_argument("--gpu-layers", type=int, default=-1)
    verify.add_argument("--json", action="store_true")
    isa = sub.add_parser(
        "isa-proof",
        help="compile the FA vector kernels for RDNA3 (or, with --cuda, an NVIDIA arch) and count "
        "the int8 dot instruction",
        description="RDNA3: needs root (a Debian 13 hipcc root, made once). --cuda: needs nvcc "
        "(cuobjdump and nvdisasm are fetched from PyPI when missing). Exit status: 0 every q8_0-K "
        "kernel has the instruction (v_dot4_i32_iu8, IDP.4A) and the f16 control none; 1 not so; "
        "2 it could not run.",
    )
    isa.add_argument("--cuda", action="store_true", help="NVIDIA: nvcc and cuobjdump, IDP.4A")
    isa.add_argument("--arch", help="with --cuda: the sm arch (default sm_90)")
    isa.add_argument("--sdist", type=Path, help="the llama-cpp-python sdist (default: downloaded)")
    isa.add_argument("--root", type=Path, help="the Debian 13 hipcc root (made when missing)")
    isa.add_argument(
        "--targets", nargs="+", help="AMD GPU targets (default: the rocm-rdna3 variant's)"
    )
    isa.add_argument(
        "--out", type=Path, help="the JSON report (default docs/int8k-isa-report.json, -sm90.json)"
    )
    isa.add_argument(
        "--table", type=Path, help="the Markdown page (default docs/int8k-isa.md or -sm90.md)"
    )
    isa.add_argument("--no-cache", action="store_true", help="compile even if cached objects exist")
    isa.add_argument(
        "--render",
        action="store_true",
        help="with --cuda: only render the page from the existing JSON (a record made elsewhere)",
    )
    count = sub.add_parser(
        "isa-count",
        help="count the int8 dot instruction in an installed libggml-cuda.so or libggml-hip.so",
        description="What `verify` counts, without loading a model. Exit status: 0 every q8_0-K "
        "kernel of the library has the instruction and the f16 control none; 1 not so; 2 it could "
        "not count (the missing tool is named).",
    )
    count.add_argument("library", type=Path, help="libggml-cuda.so or libggml-hip.so")
    count.add_argument("--kv", default="q8_0/f16", help="K/V pair to count (default q8_0/f16)")
    count.add_argument("--json", action="store_true")
    package = sub.add_parser(
        "package",
        help="build a backend package (llama.cpp's libraries + manifest) for one variant",
        description="Writes OUT/NAME/ and OUT/kvstudio-backend-NAME-...tar.gz; `kvstudio backend "
        "add` installs the archive. GPU variants that cannot be compiled here build inside a "
        "Debian root (--root; scripts/rocm_root.sh makes one with HIP 6.x).",
    )
    package.add_argument("variant")
    package.add_argument("--out", type=Path, default=Path("dist/backends"))
    package.add_argument("--root", type=Path, help="build inside this Debian root (chroot)")
    package.add_argument("--targets", nargs="+", help="fewer GPU targets (a reduced build)")
    package.add_argument("--note", default="", help="a line for the manifest (why reduced, ...)")
    package.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    package.add_argument(
        "--record",
        action="store_true",
        help="also record the manifest in docs/backend-packages/ and re-render docs/backends.md",
    )
    rpc = sub.add_parser(
        "rpc-server",
        help="compile llama.cpp's ggml-rpc-server for the built-in backend (./quickstart.sh does)",
        description="From the pinned llama-cpp-python sdist, against the installed libraries "
        "(built with -DGGML_RPC=ON), into llama_cpp/lib: `kvstudio worker` then runs on the "
        "built-in backend. Exit status: 0 built; 2 it could not (the reason is printed).",
    )
    rpc.add_argument("--sdist", type=Path, help="the llama-cpp-python sdist (default: downloaded)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from kernels.variants import VARIANTS, variant

    if args.command == "variants":
        for v in VARIANTS.values():
            print(f'{v.name:12} {v.summary}\n{"":12} CMAKE_ARGS="{v.cmake_args_text}"')
        return 0
    try:
        if args.command == "cmake-args":
            print(variant(args.variant).cmake_args_text)
            return 0
        if args.command == "build":
            from kernels.build import build
            from kernels.variants import custom_variant

            chosen = (
                custom_variant(os.environ.get("CMAKE_ARGS", ""))
                if args.variant == "custom"
                else variant(args.variant)
            )
            return build(chosen, args.source, args.target, args.jobs)
        if args.command == "isa-proof":
            if args.render and not args.cuda:
                raise ValueError("--render is for the NVIDIA record: give --cuda too.")
            return _isa_proof_cuda(args) if args.cuda else _isa_proof(args)
        if args.command == "isa-count":
            return _isa_count(args)
        if args.command == "package":
            return _package(args, variant(args.variant))
        if args.command == "rpc-server":
            from kernels.rpc_server import build_rpc_server

            build_rpc_server(sdist=args.sdist)
            return 0
        return _verify(args)
    except ValueError as error:  # includes BadInputError
        print(f"kernels: {error}", file=sys.stderr)
        return 2


def _package(args: argparse.Namespace, chosen: BuildVariant) -> int:
    from kernels.package import PackageBuildError, build_package, with_targets

    if args.targets:
        chosen = with_targets(chosen, args.targets)
    try:
        folder = build_package(
            chosen,
            args.out,
            root=args.root,
            jobs=args.jobs,
            note=args.note,
            log=lambda line: print(line, file=sys.stderr),
        )
    except PackageBuildError as error:
        print(f"kernels: {error}", file=sys.stderr)
        return 2
    if args.record:
        from kernels.package import archive_name
        from kernels.package_record import record, update_page

        print(f"Recorded {record(folder, args.out / archive_name(chosen.name))}", file=sys.stderr)
        update_page()
    return 0


def _isa_proof(args: argparse.Namespace) -> int:
    from kernels import isa_proof
    from kernels.isa_report import render_markdown, write_json

    out = args.out or isa_proof.DEFAULT_JSON
    table = args.table or isa_proof.DEFAULT_TABLE
    try:
        run = isa_proof.prove(
            args.root,
            args.targets or isa_proof.DEFAULT_TARGETS,
            use_cache=not args.no_cache,
            log=lambda line: print(line, file=sys.stderr),
        )
    except isa_proof.IsaProofError as error:
        print(f"kernels: {error}", file=sys.stderr)
        return 2
    write_json(run.report, out)
    table.write_text(
        render_markdown(run.report, os.path.relpath(out, table.parent)), encoding="utf-8"
    )
    cached = [pair for pair in run.report["instances"] if pair not in run.compiled]
    print(
        f"wrote {out} and {table} (compiled now: {', '.join(run.compiled) or 'none'}; "
        f"from the cache: {', '.join(cached) or 'none'})"
    )
    for line in run.report["violations"]:
        print(line, file=sys.stderr)
    return 0 if run.report["ok"] else 1


def _isa_proof_cuda(args: argparse.Namespace) -> int:
    from kernels import isa_cuda
    from kernels.isa_cuda_page import render_cuda_markdown
    from kernels.isa_proof import IsaProofError
    from kernels.isa_report import write_json

    out = args.out or isa_cuda.DEFAULT_JSON
    table = args.table or isa_cuda.DEFAULT_TABLE
    if args.targets or args.root:
        raise ValueError("--targets and --root are for the RDNA3 proof; --cuda takes --arch.")
    if args.render:
        report = json.loads(out.read_text(encoding="utf-8"))
        page = render_cuda_markdown(report, os.path.relpath(out, table.parent))
        table.write_text(page, encoding="utf-8")
        print(f"wrote {table} from {out}")
        return 0
    try:
        run = isa_cuda.prove(
            args.arch or isa_cuda.DEFAULT_ARCH,
            use_cache=not args.no_cache,
            sdist=args.sdist,
            log=lambda line: print(line, file=sys.stderr),
        )
    except IsaProofError as error:
        print(f"kernels: {error}", file=sys.stderr)
        return 2
    write_json(run.report, out)
    page = render_cuda_markdown(run.report, os.path.relpath(out, table.parent))
    table.write_text(page, encoding="utf-8")
    print(f"wrote {out} and {table} (compiled now: {', '.join(run.compiled) or 'none'})")
    for line in run.report["violations"]:
        print(line, file=sys.stderr)
    return 0 if run.report["ok"] else 1


def _isa_count(args: argparse.Namespace) -> int:
    from kernels import lib_isa

    k, v = args.kv.split("/", 1) if "/" in args.kv else (args.kv, "")
    if not (k and v):
        raise ValueError(f"--kv takes K/V, like q8_0/f16, not '{args.kv}'.")
    name = args.library.name
    backend = next((b for b, lib in lib_isa.LIBRARIES.items() if name.startswith(lib)), None)
    if backend is None or not args.library.is_file():
        raise ValueError(f"{args.library} is not an existing libggml-cuda.so or libggml-hip.so.")
    try:
        isa = lib_isa.count_library(args.library, backend, f"{k}-{v}")
    except OSError as error:
        print(f"kernels: {error}", file=sys.stderr)
        return 2
    if isa.missing:
        print(f"kernels: {isa.missing}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(asdict(isa) | {"problems": isa.problems}, indent=1))
    else:
        print("\n".join(lib_isa.summary_lines(isa)))
    for line in isa.problems:
        print(line, file=sys.stderr)
    return 1 if isa.problems else 0


def _verify(args: argparse.Namespace) -> int:
    # The backend the app's engine runs (`kvstudio backend use`): llama_cpp reads
    # LLAMA_CPP_LIB_PATH when imported, so it is set first.
    from app.backends.store import load_chosen_backend_here
    from app.platform.paths import data_dir

    _backend, notice = load_chosen_backend_here(data_dir())
    if notice:
        print(f"kernels: {notice}", file=sys.stderr)
    # llama_cpp before anything that imports numpy (gguf does): with numpy 2.5 imported
    # first, every model load segfaulted on the GPU machine (docs/llama-cpp-notes.md).
    import llama_cpp  # noqa: F401

    from app.kv.kv_types import KvMode
    from app.models.model_ref import resolve_model
    from kernels.verify import format_report, verify

    mode = KvMode.parse(args.kv)
    report = verify(str(resolve_model(args.model)), mode, args.ctx, args.gpu_layers)
    if args.json:
        extra = {"ok": report.ok, "on_gpu": report.on_gpu, "verified": report.verified}
        print(json.dumps(asdict(report) | extra, indent=2))
    else:
        print(format_report(report))
    if not report.ok:
        return 1
    return 0 if report.verified else NOTHING_TO_VERIFY


if __name__ == "__main__":
    sys.exit(main())
