"""The release steps end to end, as .github/workflows/release.yml runs them: scripts/release.py
makes a key, signs the real CPU package with it (the key in KVSTUDIO_RELEASE_KEY, as CI's secret
gives it), writes backends.json, and the app installs the package through that index from a real
HTTP server on 127.0.0.1 with its own downloader: a cut connection resumed with a Range, the
sha256 and the signature checked. Then each way an index can lie is refused in one sentence,
with nothing left in the backends folder."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.backends.index_install import INDEX_ENV, fetch_index, install_entry
from app.backends.package_archive import platform_tag
from app.backends.signing import DEV_KEYS_ENV, SignatureError
from app.backends.store import BUILT_IN
from app.engine.backend_probe import probe
from app.platform.errors import AppError, ChecksumMismatchError
from tests.backends.release_server import ReleaseServer

ROOT = Path(__file__).resolve().parents[2]
VERSION = "0.2.0"


def release(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "release.py"), *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def published(unsigned_cpu_package, tmp_path_factory) -> Iterator[tuple[ReleaseServer, Path]]:
    """The CPU package signed with a new release key and indexed, served from 127.0.0.1; the
    key's public line in a file for KVSTUDIO_DEV_TRUSTED_KEYS."""
    work = tmp_path_factory.mktemp("release")
    key = work / "release-key.pem"
    made = release("keygen", "--out", str(key), "--name", "test-release")
    assert made.returncode == 0, made.stderr
    (work / "trusted.txt").write_text(made.stdout)
    assert made.stdout.startswith("ed25519 ") and made.stdout.strip().endswith(" test-release")
    assert key.stat().st_mode & 0o777 == 0o600

    assets = work / "assets"
    signed = release(
        "sign", str(unsigned_cpu_package), "--version", VERSION, "--out", str(assets),
        env={"KVSTUDIO_RELEASE_KEY": key.read_text()},
    )  # fmt: skip
    assert signed.returncode == 0, signed.stderr
    with ReleaseServer(assets) as server:
        indexed = release(
            "index", *map(str, assets.glob("*.tar.gz")), "--base-url", server.url,
            "--out", str(assets / "backends.json"),
        )  # fmt: skip
        assert indexed.returncode == 0, indexed.stderr
        assert re.search(rf"cpu {VERSION} \(\d+\.\d MiB\)$", indexed.stdout.strip()), indexed
        yield server, work / "trusted.txt"


@pytest.fixture
def trusted(published, monkeypatch) -> ReleaseServer:
    server, keys = published
    monkeypatch.setenv(DEV_KEYS_ENV, str(keys))
    monkeypatch.setenv(INDEX_ENV, f"{server.url}/backends.json")
    server.log.clear()
    return server


def test_the_index_says_what_the_release_holds(published):
    server, _keys = published
    index = json.loads((server.folder / "backends.json").read_text())
    (entry,) = index["packages"]
    archive = server.folder / entry["url"].rsplit("/", 1)[1]
    assert entry["variant"] == "cpu" and entry["version"] == VERSION
    assert entry["platform"] == platform_tag() and entry["targets"] == []
    assert entry["size"] == archive.stat().st_size
    assert entry["url"] == f"{server.url}/{archive.name}"
    assert set(entry["signature"]) == {"key", "value"}


def test_a_package_is_installed_through_the_index_resuming_a_cut_download(store, trusted):
    index = fetch_index()
    entry = index.entry_for("cpu", platform_tag())
    assert entry is not None and entry.version == VERSION
    name = entry.url.rsplit("/", 1)[1]
    trusted.cut_after[name] = [1_000_000]
    seen: list[tuple[int, int]] = []
    installed = install_entry(store, entry, probe, on_progress=lambda d, t: seen.append((d, t)))
    assert installed.name == "cpu" and store.chosen_name() == "cpu"
    assert installed.manifest is not None and installed.manifest.version == VERSION
    assert trusted.gets(name) == ["", "bytes=1000000-"]  # the second GET resumed
    assert seen[-1] == (entry.size, entry.size)
    assert sorted(p.name for p in store.folder.iterdir()) == [".verified.json", "cpu"]


def lying_index(server: ReleaseServer, tmp_path: Path, **changes: object) -> str:
    """An index like the published one with `changes` to its entry, served beside it."""
    data = json.loads((server.folder / "backends.json").read_text())
    data["packages"][0].update(changes)
    name = f"lying-{next(iter(changes))}.json"
    (server.folder / name).write_text(json.dumps(data))
    return f"{server.url}/{name}"


@pytest.mark.parametrize(
    ("changes", "refusal", "words"),
    [
        ({"sha256": "0" * 64}, ChecksumMismatchError, "failed its checksum"),
        ({"variant": "vulkan"}, AppError, "holds the cpu backend, not the vulkan one the index"),
        ({"version": "0.3.0"}, AppError, f"is cpu {VERSION}, not the 0.3.0 the index names"),
        ({"signature": {"key": "0123456789abcdef", "value": "AA=="}}, SignatureError, "trust"),
    ],
    ids=["another sha", "another variant", "another version", "unknown key"],
)
def test_an_index_that_lies_is_refused_in_one_sentence(
    store, trusted, tmp_path, changes, refusal, words
):
    entry = fetch_index(lying_index(trusted, tmp_path, **changes)).entries[0]
    with pytest.raises(refusal) as refused:
        install_entry(store, entry, probe)
    text = str(refused.value)
    assert words in text and "\n" not in text and text.endswith("."), text
    # the download folder is gone (or never made), nothing installed
    assert not store.folder.exists() or list(store.folder.iterdir()) == []
    assert store.chosen_name() == BUILT_IN
    if refusal is SignatureError:
        assert [m for m, _n, _r in trusted.log if m == "GET"] == ["GET"]  # the index alone


def test_the_release_workflow_runs_these_steps_for_every_variant():
    import yaml

    from kernels.variants import VARIANTS

    workflow = yaml.safe_load((ROOT / ".github/workflows/release.yml").read_text())
    assert workflow[True]["push"]["tags"] == ["v*"]  # YAML reads the key `on` as True
    package = workflow["jobs"]["package"]
    variants = [row["variant"] for row in package["strategy"]["matrix"]["include"]]
    assert sorted(variants) == sorted(VARIANTS)
    runs = [step.get("run", "") for job in workflow["jobs"].values() for step in job["steps"]]
    steps = [r.split("scripts/release.py ")[1].split()[0] for r in runs if "release.py" in r]
    assert steps == ["build", "sign", "index"]
    sign_step = next(s for s in package["steps"] if "release.py sign" in s.get("run", ""))
    assert sign_step["env"] == {"KVSTUDIO_RELEASE_KEY": "${{ secrets.KVSTUDIO_RELEASE_KEY }}"}
