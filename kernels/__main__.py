"""`python -m kernels ...`: build variants, build, verify (see kernels/__init__.py)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict

NOTHING_TO_VERIFY = 3  # exit status: checks passed, but no GPU kernel ran (CPU build)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kernels", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("variants", help="list build variants and their CMAKE_ARGS")
    args = sub.add_parser("cmake-args", help="print one variant's CMAKE_ARGS")
    args.add_argument("variant")
    build = sub.add_parser("build", help="pip install llama-cpp-python for a variant")
    build.add_argument("variant")
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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from kernels.variants import VARIANTS, variant

    if args.command == "variants":
        for v in VARIANTS.values():
            print(f"{v.name:12} {v.summary}\n{'':12} CMAKE_ARGS=\"{v.cmake_args_text}\"")
        return 0
    try:
        if args.command == "cmake-args":
            print(variant(args.variant).cmake_args_text)
            return 0
        if args.command == "build":
            from kernels.build import build

            return build(variant(args.variant), args.source, args.target, args.jobs)
        return _verify(args)
    except ValueError as error:  # includes BadInputError
        print(f"kernels: {error}", file=sys.stderr)
        return 2


def _verify(args: argparse.Namespace) -> int:
    # llama_cpp before anything that imports numpy (gguf does): with numpy 2.5 imported
    # first, every model load segfaulted on the GPU machine (docs/llama-cpp-notes.md).
    import llama_cpp  # noqa: F401

    from app.core.kv_types import KvMode
    from app.core.model_ref import resolve_model
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
