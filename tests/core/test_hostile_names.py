"""Nothing a Hub repo names is written outside its target folder (issue 11, secrets and files).

Each kind of hostile name is published on the test Hub and downloaded, into the HF cache and
into a chosen folder: it is refused with one sentence before a request for the file is made,
and no new file appears anywhere under the test's folder. Which kinds already held before
issue 11 is said at each list.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.models.hub import download_entry, list_gguf_files
from app.platform.errors import UnsafePathError

# Held before issue 11 (safe_paths refused them): '..', absolute paths, backslashes, NUL,
# a drive letter.
HELD = {
    "dot-dot": "../../evil-Q8_0.gguf",
    "dot-dot inside": "sub/../../evil-Q8_0.gguf",
    "absolute": "/tmp/evil-Q8_0.gguf",
    "backslashes": "..\\..\\evil-Q8_0.gguf",
    "NUL": "evil\x00-Q8_0.gguf",
    "drive letter": "C:/evil-Q8_0.gguf",
}
# Written before issue 11, inside the folder but under a name that reads as another path (or
# becomes one where Windows folds it to its code page, or where a tool applies NFKC).
FAILED = {
    "division slash U+2215": "a\u2215..\u2215evil-Q8_0.gguf",
    "fullwidth solidus U+FF0F": "\uff0e\uff0e\uff0fevil-Q8_0.gguf",
    "one dot leader U+2024": "\u2024\u2024/evil-Q8_0.gguf",
    "only dots": "sub/.../evil-Q8_0.gguf",
    "NTFS stream": "evil-Q8_0.gguf:hidden.gguf",
    "terminal escape": "evil\x1b]0;owned\x07-Q8_0.gguf",
    "right-to-left override": "evil\u202eflog-Q8_0.gguf",
}
ALL = {**HELD, **FAILED}


@pytest.fixture(scope="module")
def tried() -> list[str]:
    return []


@pytest.mark.parametrize("kind", list(ALL))
def test_a_hostile_name_is_refused_and_nothing_is_written(
    hub_env, tiny_gguf, tmp_path, kind, tried, reliability
) -> None:
    name = ALL[kind]
    hub_env.add_repo("evil/names-GGUF", {name: tiny_gguf("e.gguf")})
    (entry,) = list_gguf_files("evil/names-GGUF").entries
    before = set(tmp_path.rglob("*"))
    for folder in (None, tmp_path / "lib"):
        with pytest.raises(UnsafePathError) as refused:
            download_entry(entry, folder=folder)
        (line,) = str(refused.value).splitlines()
        assert "was not downloaded" in line and "\x1b" not in line and "\u202e" not in line
    assert set(tmp_path.rglob("*")) - before <= {tmp_path / "lib"}
    assert not Path("/tmp/evil-Q8_0.gguf").exists()
    assert not any("/resolve/" in r.path or "/cdn/" in r.path for r in hub_env.log)
    tried.append(kind)
    reliability.record(
        "Secrets and files", "hostile file names refused (cache + folder)", len(tried)
    )
    reliability.record("Secrets and files", "kinds of hostile names", ", ".join(sorted(tried)))


def test_names_of_other_scripts_still_download(hub_env, tiny_gguf) -> None:
    """The refusals are about separators and dots, not about non-ASCII names."""
    name = "模型-ünïcode-Q8_0.gguf"
    hub_env.add_repo("acme/intl-GGUF", {name: tiny_gguf("i.gguf")})
    path = download_entry(list_gguf_files("acme/intl-GGUF").entries[0])
    assert path.name == name and path.is_file()


def test_a_blobs_folder_linking_outside_the_cache_is_refused(hub_env, tiny_gguf, tmp_path) -> None:
    """Failed before issue 11: the blob path in the HF cache was not checked, so the file was
    written through the link (a linked folder on the way into a chosen folder was already
    refused: test_download_faults.py)."""
    hub_env.add_repo("acme/linked-GGUF", {"x-Q8_0.gguf": tiny_gguf("x.gguf")})
    outside = tmp_path / "outside"
    outside.mkdir()
    storage = tmp_path / "hf-cache" / "models--acme--linked-GGUF"
    storage.mkdir(parents=True)
    (storage / "blobs").symlink_to(outside)
    with pytest.raises(UnsafePathError, match="link that leaves"):
        download_entry(list_gguf_files("acme/linked-GGUF").entries[0])
    assert list(outside.iterdir()) == []
