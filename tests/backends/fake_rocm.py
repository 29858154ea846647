"""A rocm-rdna3 package for machines without ROCm, shaped like the real one where it matters here:
the manifest fields of the recorded build (docs/backend-packages/rocm-rdna3.json: summary,
gfx targets, FA pairs, CMake arguments, instruction counts; the kernel version of this
checkout's patches), and a libggml.so that needs
libggml-hip.so, which needs ROCm's libamdhip64.so.6, as the real HIP build links. Its other
libraries are the real CPU package's. So it downloads, verifies and unpacks as a real package
does, and its test load fails for want of ROCm, as the real one does on a machine without it.

libggml.so's dependency is renamed in place (libggml-cpu.so and libggml-hip.so are names of the
same length in its dynamic string table); libggml-hip.so is compiled here against a stub
libamdhip64.so.6 that is not shipped.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from app.backends.manifest import SIGNATURE_NAME
from kernels.patch_set import kernel_version
from tests.backends.package_edits import copy_package, repack, rewrite_manifest

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "docs" / "backend-packages" / "rocm-rdna3.json"


def _compile(source: str, out: Path, *args: str) -> None:
    c_file = out.with_suffix(".c")
    c_file.write_text(source)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(out), str(c_file), *args], check=True)
    c_file.unlink()


def rocm_rdna3_package(cpu_package: Path, work: Path) -> Path:
    """The archive, unsigned (scripts/release.py signs it), in `work`."""
    stub_folder = work / "stub"
    stub_folder.mkdir(parents=True)
    stub = stub_folder / "libamdhip64.so.6"
    _compile("int hipInit(unsigned f) { return f; }\n", stub, "-Wl,-soname,libamdhip64.so.6")
    cpu = copy_package(cpu_package, work / "cpu-copy")
    folder = cpu.rename(cpu.with_name("rocm-rdna3"))
    _compile(
        "int hipInit(unsigned);\nint ggml_backend_hip_reg(void) { return hipInit(0); }\n",
        folder / "libggml-hip.so",
        str(stub),
    )
    ggml = (folder / "libggml.so").read_bytes()
    assert ggml.count(b"\0libggml-cpu.so\0") == 1
    (folder / "libggml.so").write_bytes(ggml.replace(b"\0libggml-cpu.so\0", b"\0libggml-hip.so\0"))
    shutil.rmtree(stub_folder)
    record = json.loads(RECORD.read_text())
    rewrite_manifest(
        folder,
        name="rocm-rdna3",
        summary=record["summary"],
        gpu_targets=tuple(record["gpu_targets"]),
        fa_pairs=tuple(record["fa_pairs"]),
        cmake_args=tuple(record["cmake_args"]),
        instruction_counts=record["instruction_counts"],
        kernel=kernel_version(),  # what a build with this checkout's patches carries
    )
    (folder / SIGNATURE_NAME).unlink()
    return repack(folder, work / "kvstudio-backend-rocm-rdna3-0.3.36-linux-x86_64.tar.gz")
