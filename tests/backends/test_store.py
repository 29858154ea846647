"""Installing and choosing backend packages: a real CPU package, the real probe (a child process
that loads the libraries), and every way a package can be wrong refused with one sentence while
the previous backend stays in use."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from app.backends.manifest import MANIFEST_NAME, BadPackageError, read_manifest
from app.backends.store import BUILT_IN, BackendStore
from app.engine.backend_probe import BackendLoadError, probe
from app.kv.kv_types import KvMode
from app.platform.errors import BadInputError
from tests.backends.package_edits import (
    copy_package,
    flip_a_byte,
    repack,
    rewrite_manifest,
)


def installed_names(store: BackendStore) -> list[str]:
    return [b.name for b in store.installed()]


def one_sentence(error: Exception) -> str:
    text = str(error)
    assert "\n" not in text and text.endswith((".", ")")), text
    return text


def test_the_cpu_package_is_portable_and_names_exactly_its_files(unsigned_cpu_package, tmp_path):
    folder = copy_package(unsigned_cpu_package, tmp_path)
    manifest = read_manifest(folder)
    assert manifest.name == "cpu" and manifest.llama_cpp_python == "0.3.36"
    assert "-DGGML_NATIVE=OFF" in manifest.cmake_args
    assert not any("native" in arg and arg != "-DGGML_NATIVE=OFF" for arg in manifest.cmake_args)
    assert manifest.fa_pairs == () and manifest.handles_pair(KvMode.parse("q8_0/f16"))
    present = {p.name for p in folder.iterdir()} - {MANIFEST_NAME}
    assert present == set(manifest.files)
    assert {
        "libllama.so",
        "libggml.so",
        "libggml-base.so",
        "libggml-cpu.so",
        "libmtmd.so",
    } <= present
    assert "ggml-rpc-server" in present  # any install can be a worker
    for name in present:
        dynamic = subprocess.run(
            ["readelf", "-d", str(folder / name)], capture_output=True, text=True, check=True
        ).stdout
        # Found next to each other wherever unpacked, and one file per library (no .so.0 names).
        assert "[$ORIGIN]" in dynamic, name
        assert ".so.0" not in dynamic.replace("libc.so", ""), name


def test_added_package_is_listed_and_chosen_only_when_asked(store, cpu_package):
    assert installed_names(store) == [BUILT_IN] and store.chosen_name() == BUILT_IN
    added = store.add(cpu_package, probe)
    assert added.name == "cpu" and installed_names(store) == [BUILT_IN, "cpu"]
    assert store.chosen_name() == BUILT_IN
    store.use("cpu", probe)
    backend, notice = store.for_engine()
    assert (backend.name, notice) == ("cpu", None)
    assert backend.folder == store.folder / "cpu"
    store.use(BUILT_IN, probe)
    assert store.for_engine()[0].folder is None


def test_probe_loads_the_packages_own_libllama(store, cpu_package):
    folder = store.add(cpu_package, probe).folder
    assert folder is not None
    result = probe(folder)
    assert Path(result.library).parent == folder.resolve()
    assert result.devices and result.devices[0].startswith("CPU")
    assert result.build.gpu_backends == ()
    built_in = probe(None)
    assert Path(built_in.library).parent != folder.resolve()


def test_a_changed_byte_is_refused_and_nothing_is_installed(store, cpu_package, tmp_path):
    folder = copy_package(cpu_package, tmp_path)
    flip_a_byte(folder / "libllama.so")
    tampered = repack(folder, tmp_path / "tampered.tar.gz")
    with pytest.raises(BadPackageError) as refused:
        store.add(tampered, probe)
    assert "libllama.so does not match its sha256" in one_sentence(refused.value)
    assert installed_names(store) == [BUILT_IN] and store.chosen_name() == BUILT_IN
    assert [p.name for p in store.folder.iterdir()] == []  # no staging folder left behind


def test_a_byte_changed_after_use_is_caught_and_the_engine_falls_back(store, cpu_package):
    store.add(cpu_package, probe)
    store.use("cpu", probe)
    flip_a_byte(store.folder / "cpu" / "libggml-cpu.so")  # same size, other bytes
    backend, notice = store.for_engine()
    assert backend.name == BUILT_IN
    assert notice is not None and "libggml-cpu.so changed since it was verified" in notice
    with pytest.raises(BadPackageError) as refused:
        store.use("cpu", probe)
    assert "does not match its sha256" in one_sentence(refused.value)


def test_a_package_that_does_not_load_is_refused_and_the_previous_one_stays(
    store, cpu_package, tmp_path
):
    store.add(cpu_package, probe)
    store.use("cpu", probe)
    folder = copy_package(cpu_package, tmp_path)
    (folder / "libggml-cpu.so").write_bytes(b"\x7fELF not really a library" * 100)
    rewrite_manifest(folder)  # its manifest is honest about the broken file
    broken = repack(folder, tmp_path / "broken.tar.gz")
    with pytest.raises(BackendLoadError) as refused:
        store.add(broken, probe)
    assert "The cpu backend does not load" in one_sentence(refused.value)
    assert store.chosen_name() == "cpu"
    assert store.for_engine() == (store.get("cpu"), None)  # the working one is untouched


def _archive_with(tmp_path: Path, entries: list[tarfile.TarInfo]) -> Path:
    path = tmp_path / "odd.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for info in entries:
            data = b"x" * info.size if info.isfile() else None
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name: str, size: int = 4) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    return info


def _link(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    return info


@pytest.mark.parametrize(
    ("entries", "words"),
    [
        ([_file("cpu/../../evil.so")], "which a backend package may not"),
        ([_file("/etc/libllama.so")], "which a backend package may not"),
        ([_link("cpu/libllama.so", "/etc/passwd")], "which a backend package may not"),
        ([_file("cpu/install.sh")], "which a backend package may not"),
        ([_file("cpu/evil.dll")], "which a backend package may not"),
        ([_file("cpu/sub/libllama.so")], "which a backend package may not"),
        ([_file("a/manifest.json"), _file("b/libllama.so")], "is not one backend folder"),
        ([_file("cpu/libllama.so")], "has no manifest.json"),
    ],
)
def test_archives_that_are_not_one_plain_package_are_refused(store, tmp_path, entries, words):
    archive = _archive_with(tmp_path, entries)
    with pytest.raises(BadPackageError) as refused:
        store.add(archive, probe)
    assert words in one_sentence(refused.value)
    assert installed_names(store) == [BUILT_IN]
    assert not (tmp_path.parent / "evil.so").exists()


def test_a_file_that_is_not_an_archive_or_ends_early_is_refused(store, cpu_package, tmp_path):
    text = tmp_path / "notes.tar.gz"
    text.write_text("not an archive\n")
    with pytest.raises(BadPackageError) as refused:
        store.add(text, probe)
    assert "is not a .tar.gz backend package" in one_sentence(refused.value)
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(cpu_package.read_bytes()[: cpu_package.stat().st_size // 2])
    with pytest.raises(BadPackageError):
        store.add(cut, probe)
    assert installed_names(store) == [BUILT_IN]


def test_an_unknown_backend_name_gets_one_sentence(store):
    with pytest.raises(BadInputError) as refused:
        store.use("rocm-rdna3", probe)
    assert "No backend named 'rocm-rdna3' is installed (installed: built-in)." == str(refused.value)


def test_a_data_folder_with_a_space_works(cpu_package, tmp_path):
    """The default data folder is ".../KVStudio/KV Studio/": /proc/<pid>/maps lines carry that
    space, and reading them up to the first space once refused every package there."""
    store = BackendStore(tmp_path / "KV Studio")
    folder = store.add(cpu_package, probe).folder
    assert " " in str(folder)
    assert Path(probe(folder).library) == folder / "libllama.so"
