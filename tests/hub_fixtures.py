"""pytest fixtures around tests/hub_server.py, registered for every test by tests/conftest.py
(pytest_plugins), so a test only names them: hub, hub_env, silent_hub_url, closed_hub_url,
tiny_gguf, small_fs.

`hub_env` points HF_ENDPOINT at the fake Hub and HF_HUB_CACHE, HF_HOME, HF_TOKEN_PATH and
KVSTUDIO_DATA_DIR at fresh folders under tmp_path (and clears HF_TOKEN / HF_HUB_OFFLINE),
so nothing touches the real cache or the network. KVSTUDIO_NO_KEYRING keeps a saved token in
that HF_TOKEN_PATH file, never in the keyring of the machine running the tests.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.gguf_factory import write_tiny_gguf
from tests.hub_server import HubServer


@pytest.fixture
def hub() -> Iterator[HubServer]:
    with HubServer() as server:
        yield server


@pytest.fixture
def hub_env(hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HubServer:
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "hf-home" / "token"))
    monkeypatch.setenv("KVSTUDIO_DATA_DIR", str(tmp_path / "kvstudio-data"))
    monkeypatch.setenv("KVSTUDIO_NO_KEYRING", "1")
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    return hub


@pytest.fixture
def silent_hub_url() -> Iterator[str]:
    """The URL of a server that accepts connections and never answers (a hung Hub): a
    listening socket nobody accepts on; the kernel completes the handshake by itself."""
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


@pytest.fixture
def closed_hub_url() -> str:
    """The URL of a port nothing listens on (a connection there is refused at once)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def tiny_gguf(tmp_path: Path) -> Callable[..., Path]:
    """tiny_gguf(name, **write_tiny_gguf kwargs) -> a real small GGUF under tmp_path/models-src."""
    folder = tmp_path / "models-src"
    folder.mkdir(exist_ok=True)

    def make(name: str = "tiny.gguf", **kwargs: object) -> Path:
        return write_tiny_gguf(folder / name, **kwargs)  # type: ignore[arg-type]

    return make


SMALL_DISK_KINDS = ("tmpfs", "simulated")


class DiskUsage(NamedTuple):  # shutil.disk_usage's fields
    total: int
    used: int
    free: int


class SimulatedSmallDisk:
    """A folder that behaves like a filesystem of `size` bytes, without root.

    Its used space is the bytes of the files in it. While installed, shutil.disk_usage of a
    path inside reports that, and os.write to a file inside fails with ENOSPC once the
    folder is full, the way the kernel fails a write on a full disk: a write that only
    partly fits writes what fits first. The download path writes through os.write
    (app/models/hub/disk_writer.py), so the real code meets the error at the real byte.
    """

    def __init__(self, folder: Path, size: int) -> None:
        self.folder = folder.resolve()
        self.size = size
        self._disk_usage = shutil.disk_usage
        self._write = os.write

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(shutil, "disk_usage", self.disk_usage)
        monkeypatch.setattr(os, "write", self.write)

    def used(self) -> tuple[int, set[tuple[int, int]]]:
        """Bytes in the folder's files, and those files' (device, inode)."""
        total, inodes = 0, set()
        for root, _dirs, files in os.walk(self.folder):
            for name in files:
                try:
                    st = os.stat(os.path.join(root, name), follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    total += st.st_size
                    inodes.add((st.st_dev, st.st_ino))
        return total, inodes

    def disk_usage(self, path: str | os.PathLike[str]) -> DiskUsage:
        if not Path(path).resolve().is_relative_to(self.folder):
            return DiskUsage(*self._disk_usage(path))
        used, _ = self.used()
        return DiskUsage(self.size, used, max(0, self.size - used))

    def write(self, fd: int, data: bytes | memoryview) -> int:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return self._write(fd, data)
        used, inodes = self.used()
        if (st.st_dev, st.st_ino) not in inodes:
            return self._write(fd, data)
        offset = os.lseek(fd, 0, os.SEEK_CUR)
        grows_by = max(0, offset + len(data) - st.st_size)
        room = self.size - used
        if grows_by <= room:
            return self._write(fd, data)
        fits = len(data) - (grows_by - max(0, room))
        if fits <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self._write(fd, memoryview(data)[:fits])


def make_small_disk(
    kind: str, point: Path, size: int, monkeypatch: pytest.MonkeyPatch, cleanup: list[Path]
) -> Path:
    """A folder at `point` holding at most `size` bytes: a real tmpfs ('tmpfs': needs root
    and mount permission, else the test is skipped) or a SimulatedSmallDisk ('simulated':
    runs anywhere)."""
    point.mkdir(parents=True)
    if kind == "simulated":
        SimulatedSmallDisk(point, size).install(monkeypatch)
        return point
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill the disk: {result.stderr.strip()}")
    cleanup.append(point)
    return point


@pytest.fixture(params=SMALL_DISK_KINDS)
def small_fs(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[int], Path]]:
    """small_fs(bytes) -> a folder holding at most that many bytes: a real tmpfs where this
    user may mount one, and, everywhere, a simulated full disk (SimulatedSmallDisk)."""
    mounts: list[Path] = []
    count = iter(range(100))

    def make(size: int) -> Path:
        return make_small_disk(
            request.param, tmp_path / f"small-fs-{next(count)}", size, monkeypatch, mounts
        )

    yield make
    for point in mounts:
        subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)


def write_split_gguf(source: Path, target: Path, max_tensors: int) -> list[Path]:
    """Rewrite a GGUF as llama.cpp split parts (`<target stem>-0000i-of-0000N.gguf`), as
    gguf-split does: every part carries split.* metadata, part 1 all the model's keys."""
    import gguf

    reader = gguf.GGUFReader(source)
    arch = reader.fields["general.architecture"].contents()
    target.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(target, arch, split_max_tensors=max_tensors)
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        sub_type = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), field.types[0], sub_type=sub_type)
    for tensor in reader.tensors:
        writer.add_tensor(
            tensor.name,
            tensor.data,
            raw_shape=tuple(reversed(tensor.shape.tolist())),
            raw_dtype=tensor.tensor_type,
        )
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return writer.format_shard_names(target)
