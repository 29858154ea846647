"""`kvstudio backend` as a user types it: add, use, ls, verify, run on the package, and every
refusal one line on stderr with exit 2 while the previous backend stays in use."""

from __future__ import annotations

import json

import pytest

from tests.backends.package_edits import copy_package, flip_a_byte, repack
from tests.cli_runner import assert_bad_input, kvstudio

pytestmark = pytest.mark.slow


def test_add_use_verify_and_run_on_the_cpu_package(data_folder, cpu_package):
    env = {"KVSTUDIO_DATA_DIR": str(data_folder)}
    added = kvstudio("backend", "add", str(cpu_package), "--use", env=env)
    assert added.returncode == 0, added.stderr
    assert added.stdout == "Added the cpu backend; the engine now runs it.\n"

    listed = kvstudio("backend", "ls", env=env).stdout.splitlines()
    assert listed[0].split() == ["BACKEND", "GPU", "TARGETS", "FA", "PAIRS", "FA", "KERNEL", "WHAT"]
    assert listed[1].startswith("  built-in") and listed[2].startswith("* cpu")
    assert listed[2].split()[2:5] == ["-", "all", "-"]  # CPU only: no GPU kernels to name

    verified = kvstudio("backend", "verify", env=env)
    assert verified.returncode == 0, verified
    assert f"loads: {data_folder / 'backends' / 'cpu' / 'libllama.so'}" in verified.stdout
    assert "no GPU int8-K kernel is involved" in verified.stdout
    assert verified.stdout.rstrip().endswith("verdict: verified")

    doctor = json.loads(kvstudio("doctor", "--json", env=env).stdout)
    assert doctor["backend"] == "cpu" and doctor["backend_notice"] is None
    assert doctor["library"] == str(data_folder / "backends" / "cpu" / "libllama.so")

    ran = kvstudio("run", "starter", "-p", "The capital of France is", "-n", "4", env=env)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() and "[4 tokens" in ran.stderr
    assert "warning" not in ran.stderr  # a CPU build with RPC compiled in expects no GPU


def test_refusals_are_one_line_and_keep_the_backend(data_folder, cpu_package, tmp_path):
    env = {"KVSTUDIO_DATA_DIR": str(data_folder)}
    assert_bad_input(kvstudio("backend", "use", "rocm-rdna3", env=env), "No backend named")
    folder = copy_package(cpu_package, tmp_path)
    flip_a_byte(folder / "libggml.so")
    tampered = repack(folder, tmp_path / "tampered.tar.gz")
    assert_bad_input(
        kvstudio("backend", "add", str(tampered), "--use", env=env),
        "libggml.so does not match its sha256",
    )
    assert_bad_input(
        kvstudio("backend", "add", str(tmp_path / "none.tar.gz"), env=env), "is not a file"
    )
    listed = kvstudio("backend", "ls", env=env).stdout.splitlines()
    assert [line.split()[:2] for line in listed[1:]] == [["*", "built-in"]]


def test_an_unsigned_package_is_refused_unless_allowed_with_a_warning(
    data_folder, unsigned_cpu_package
):
    env = {"KVSTUDIO_DATA_DIR": str(data_folder)}
    assert_bad_input(
        kvstudio("backend", "add", str(unsigned_cpu_package), "--use", env=env),
        "is not signed, so it was not installed; a package you built yourself can be installed "
        "with --allow-unsigned.",
    )
    assert not (data_folder / "backends" / "cpu").exists()
    allowed = kvstudio(
        "backend", "add", str(unsigned_cpu_package), "--use", "--allow-unsigned", env=env
    )
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout == "Added the cpu backend; the engine now runs it.\n"
    assert allowed.stderr.startswith("kvstudio: warning: --allow-unsigned installs a package")
