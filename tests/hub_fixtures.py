"""pytest fixtures around tests/hub_server.py; import them into a test module:

    from tests.hub_fixtures import hub, hub_env, small_fs, tiny_gguf  # noqa: F401

`hub_env` points HF_ENDPOINT at the fake Hub and HF_HUB_CACHE, HF_HOME, HF_TOKEN_PATH and
KVSTUDIO_DATA_DIR at fresh folders under tmp_path (and clears HF_TOKEN / HF_HUB_OFFLINE),
so nothing touches the real cache or the network.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

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
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    return hub


@pytest.fixture
def tiny_gguf(tmp_path: Path) -> Callable[..., Path]:
    """tiny_gguf(name, **write_tiny_gguf kwargs) -> a real small GGUF under tmp_path/models-src."""
    folder = tmp_path / "models-src"
    folder.mkdir(exist_ok=True)

    def make(name: str = "tiny.gguf", **kwargs: object) -> Path:
        return write_tiny_gguf(folder / name, **kwargs)  # type: ignore[arg-type]

    return make


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Callable[[int], Path]]:
    """small_fs(bytes) -> a folder on a tmpfs of that size (skips if mounting is refused)."""
    mounts: list[Path] = []

    def make(size: int) -> Path:
        point = tmp_path / f"small-fs-{len(mounts)}"
        point.mkdir()
        result = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)],
            capture_output=True, text=True, check=False,
        )
        if result.returncode != 0:
            pytest.skip(f"cannot mount a small tmpfs to fill the disk: {result.stderr.strip()}")
        mounts.append(point)
        return point

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
        writer.add_tensor(tensor.name, tensor.data, raw_shape=tuple(reversed(tensor.shape.tolist())),
                          raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return writer.format_shard_names(target)
