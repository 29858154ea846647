"""Build llama-cpp-python for one variant with pip, passing the variant's CMAKE_ARGS."""

from __future__ import annotations

import os
import subprocess
import sys

from kernels.variants import LLAMA_CPP_PYTHON_VERSION, BuildVariant


def build_command(source: str | None, target: str | None) -> list[str]:
    """The pip command; `source` is an sdist path/folder (default: PyPI's pinned version)."""
    cmd = [sys.executable, "-m", "pip", "install", "--no-cache-dir", "--force-reinstall"]
    if source:
        # A local source tree: its build needs (scikit-build-core, cmake) come from this env.
        cmd += ["--no-build-isolation", "--no-deps", source]
    else:
        cmd += [f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}"]
    if target:
        cmd += ["--target", target]
    return cmd


def build(variant: BuildVariant, source: str | None, target: str | None, jobs: int) -> int:
    env = dict(os.environ)
    env["CMAKE_ARGS"] = variant.cmake_args_text
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(jobs)
    cmd = build_command(source, target)
    print(f"CMAKE_ARGS={env['CMAKE_ARGS']!r}", file=sys.stderr)
    print(" ".join(cmd), file=sys.stderr)
    return subprocess.call(cmd, env=env)
