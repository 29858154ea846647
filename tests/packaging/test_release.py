"""The release steps end to end, as .github/workflows/release.yml runs them: scripts/release.py
makes a key, signs the real CPU package with it (the key in KVSTUDIO_RELEASE_KEY, as CI's secret
gives it), writes backends.json, and the app installs the package through that index from a real
HTTP server on 127.0.0.1 with its own downloader: a cut connection resumed with a Range, the
sha256 and the signature checked. Then each way an index can lie is refused in one sentence,
with nothing left in the backends folder. Last, SHA256SUMS of those assets and stand-ins for the
installers, signed with the same key: checked by sha256sum and openssl as a user would, and a
changed file or a changed list is caught."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.backends.index_install import INDEX_ENV, fetch_index, install_entry
from app.backends.package_archive import platform_tag
from app.backends.signing import (
    DEV_KEYS_ENV,
    SignatureError,
    check_signature,
    parse_key_lines,
    public_key_pem,
)
from app.backends.store import BUILT_IN
from app.engine.backend_probe import probe
from app.platform.errors import AppError, ChecksumMismatchError
from tests.backends.release_server import ReleaseServer
from tests.packaging.packaging_scripts import PACKAGING

sys.path.insert(0, str(PACKAGING))  # the scripts import each other by name
import linux_artifacts  # noqa: E402

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


def release_workflow() -> dict:
    import yaml

    return yaml.safe_load((ROOT / ".github/workflows/release.yml").read_text())


def runs_of(job: dict) -> list[str]:
    return [step.get("run", "") for step in job["steps"]]


def test_the_release_workflow_runs_these_steps_for_every_variant():
    from kernels.variants import VARIANTS

    workflow = release_workflow()
    assert workflow[True]["push"]["tags"] == ["v*"]  # YAML reads the key `on` as True
    package = workflow["jobs"]["package"]
    variants = [row["variant"] for row in package["strategy"]["matrix"]["include"]]
    assert sorted(variants) == sorted(VARIANTS)
    runs = [run for job in workflow["jobs"].values() for run in runs_of(job)]
    steps = [r.split("scripts/release.py ")[1].split()[0] for r in runs if "release.py" in r]
    assert steps == ["check-tag", "build", "sign", "index", "sums"]
    secret = {"KVSTUDIO_RELEASE_KEY": "${{ secrets.KVSTUDIO_RELEASE_KEY }}"}
    for job, step in (("package", "release.py sign"), ("publish", "release.py sums")):
        (found,) = [s for s in workflow["jobs"][job]["steps"] if step in s.get("run", "")]
        assert found["env"] == secret, job


def test_the_release_publishes_the_installers_ci_builds_with_their_sums():
    """The installer jobs run the build CI runs here, upload what it names, and the
    last job lists every uploaded installer and package in SHA256SUMS before publishing."""
    from app import __version__

    jobs = release_workflow()["jobs"]
    linux = runs_of(jobs["linux-app"])
    assert any("packaging/build.py --platform linux --out dist" in r for r in linux)
    assert any("dist/KVStudio.AppDir/AppRun selftest" in r for r in linux)
    windows = runs_of(jobs["windows-app"])
    assert any("packaging/build.py --platform windows --out dist" in r for r in windows)
    base = linux_artifacts.base_name(__version__)
    built = {  # the names packaging/build.py gives the installers
        "linux-app": [f"{base}.tar.gz", f"kvstudio_{__version__}_amd64.deb"],
        "windows-app": [f"KVStudio-{__version__}-windows-x64.exe"],
    }
    publish = jobs["publish"]
    assert set(publish["needs"]) == {"package", "linux-app", "windows-app"}
    downloads = next(r for r in runs_of(publish) if "gh release download" in r)
    (installers,) = [line for line in downloads.splitlines() if "dist/installers" in line]
    fetched = re.findall(r'--pattern "([^"]+)"', installers)
    for job, names in built.items():
        upload = next(r for r in runs_of(jobs[job]) if "gh release upload" in r)
        globs = [w.removeprefix("dist/") for w in upload.split() if w.startswith("dist/")]
        for name in names:  # uploaded by its job, then fetched for SHA256SUMS
            assert any(fnmatch.fnmatch(name, g) for g in globs), (job, name, globs)
            assert any(fnmatch.fnmatch(name, g) for g in fetched), (name, fetched)
    assert not any(fnmatch.fnmatch(archive_name_for("cpu"), g) for g in fetched)  # apart
    sums = next(r for r in runs_of(publish) if "release.py sums" in r)
    assert "dist/signed/*" in sums and "dist/installers/*" in sums and "backends.json" in sums
    final = next(r for r in runs_of(publish) if "gh release upload" in r)
    assert "dist/SHA256SUMS " in final and "dist/SHA256SUMS.sig" in final


def archive_name_for(variant: str) -> str:
    from kernels.package import archive_name

    return archive_name(variant)


def openssl_verifies(public_pem: Path, listing: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", str(public_pem), "-rawin",
         "-in", str(listing), "-sigfile", str(listing.with_name("SHA256SUMS.sig"))],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def sha256sum_check(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sha256sum", "--check", "--strict", "SHA256SUMS"],
        cwd=folder, capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_sha256sums_of_the_release_are_signed_and_check_as_a_user_would(published, tmp_path):
    server, trusted_file = published
    release_key = trusted_file.parent / "release-key.pem"
    assets = tmp_path / "assets"
    assets.mkdir()
    for name in ("backends.json", archive_name_for("cpu")):
        shutil.copy(server.folder / name, assets / name)
    stand_ins = ["kvstudio-0.2.0-linux-x86_64.tar.gz", "kvstudio_0.2.0_amd64.deb"]
    for number, name in enumerate([*stand_ins, "KVStudio-0.2.0-windows-x64.exe"]):
        (assets / name).write_bytes(os.urandom(4096) + bytes([number]))
    files = sorted(assets.iterdir())
    key_env = {"KVSTUDIO_RELEASE_KEY": release_key.read_text()}
    made = release("sums", *map(str, files), "--out", str(assets), env=key_env)
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip().endswith("SHA256SUMS.sig: 5 files")

    checked = sha256sum_check(assets)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert sorted(checked.stdout.splitlines()) == sorted(f"{p.name}: OK" for p in files)
    (test_key,) = parse_key_lines(trusted_file.read_text(), "test")
    public_pem = tmp_path / "release-public.pem"
    public_pem.write_text(public_key_pem(test_key))
    verified = openssl_verifies(public_pem, assets / "SHA256SUMS")
    assert verified.returncode == 0 and "Signature Verified Successfully" in verified.stdout

    # A changed installer fails its line; a list edited to match it fails the signature.
    changed = assets / stand_ins[1]
    changed.write_bytes(changed.read_bytes()[:-1] + b"x")
    assert f"{changed.name}: FAILED" in sha256sum_check(assets).stdout
    listing = assets / "SHA256SUMS"
    new_sum = subprocess.run(
        ["sha256sum", changed.name], cwd=assets, capture_output=True, text=True
    )
    lines = [
        new_sum.stdout if changed.name in line else line
        for line in listing.read_text().splitlines(True)
    ]
    listing.write_text("".join(lines))
    assert sha256sum_check(assets).returncode == 0  # the list agrees again, but
    assert openssl_verifies(public_pem, listing).returncode != 0  # the signature does not


def test_sums_refuses_in_one_sentence(tmp_path):
    for folder, content in (("a", b"1"), ("b", b"2")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "same.exe").write_bytes(content)
    out = tmp_path / "out"
    unkeyed = release("sums", str(tmp_path / "a" / "same.exe"), "--out", str(out),
                      env={"KVSTUDIO_RELEASE_KEY": ""})  # fmt: skip
    assert unkeyed.returncode == 2, unkeyed.stderr
    assert "Give the signing key with --key or in KVSTUDIO_RELEASE_KEY." in unkeyed.stderr
    key = tmp_path / "k.pem"
    assert release("keygen", "--out", str(key), "--name", "k").returncode == 0
    for files, words in [
        ([tmp_path / "missing.deb"], "missing.deb is not a file"),
        ([tmp_path / d / "same.exe" for d in "ab"], "Two assets are named same.exe"),
    ]:
        refused = release("sums", *map(str, files), "--key", str(key), "--out", str(out))
        assert refused.returncode == 2 and words in refused.stderr, refused.stderr
        assert refused.stderr.count("\n") == 1 and not (out / "SHA256SUMS").exists()


def test_the_docs_show_the_release_key_openssl_checks_with():
    """docs/packages.md prints the PEM of every key the app trusts, as `release.py public-key`
    does; a key added to or removed from release_keys.py without the docs fails here."""
    printed = release("public-key")
    assert printed.returncode == 0 and printed.stdout.count("BEGIN PUBLIC KEY") >= 1
    docs = (ROOT / "docs" / "packages.md").read_text(encoding="utf-8")
    assert printed.stdout.strip() in docs


def test_a_published_package_signed_again_with_a_new_key_trusts_only_the_new_one(
    published, tmp_path, monkeypatch
):
    """Rotation after a leak (docs/packages.md): `sign` over an already signed archive replaces
    its manifest.sig; the app then trusts it under the new key and refuses it under the old."""
    server, old_keys = published
    new_key, new_keys = tmp_path / "new.pem", tmp_path / "new.txt"
    made = release("keygen", "--out", str(new_key), "--name", "kvstudio-release-2")
    new_keys.write_text(made.stdout)
    signed = release(
        "sign", str(server.folder / archive_name_for("cpu")), "--version", VERSION,
        "--out", str(tmp_path / "resigned"), env={"KVSTUDIO_RELEASE_KEY": new_key.read_text()},
    )  # fmt: skip
    assert signed.returncode == 0, signed.stderr
    with tarfile.open(signed.stdout.strip(), "r|gz") as tar:
        head = [(m.name, tar.extractfile(m).read()) for _, m in zip(range(3), tar, strict=False)]
    assert [name for name, _ in head[:2]] == ["cpu/manifest.json", "cpu/manifest.sig"]
    assert not head[2][0].endswith(".sig")  # one signature, the new one
    manifest, signature = head[0][1], head[1][1]
    monkeypatch.setenv(DEV_KEYS_ENV, str(new_keys))
    checked = check_signature("cpu.tar.gz", manifest, signature)
    assert checked.key is not None and checked.key.name == "kvstudio-release-2"
    monkeypatch.setenv(DEV_KEYS_ENV, str(old_keys))
    with pytest.raises(SignatureError, match="which this app does not trust"):
        check_signature("cpu.tar.gz", manifest, signature)


def test_a_tag_other_than_the_apps_version_is_refused():
    from app import __version__

    matching = release("check-tag", f"v{__version__}")
    assert (
        matching.returncode == 0
        and matching.stdout == f"v{__version__} releases version {__version__}.\n"
    )
    other = release("check-tag", "v99.0.0")
    assert other.returncode == 2 and other.stderr.count("\n") == 1, other.stderr
    assert f"does not match the app's version {__version__}" in other.stderr
