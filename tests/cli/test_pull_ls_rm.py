"""`kvstudio pull / ls / rm` as a user runs them, against the fake Hub (a real subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_runner import kvstudio as run_kvstudio

ROOT = Path(__file__).resolve().parents[2]


def kvstudio(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return run_kvstudio(*args, timeout=timeout)


def one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("kvstudio:")]
    assert len(errors) == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1] == errors[0]
    return errors[0]


@pytest.fixture
def repo(hub_env, tiny_gguf):
    hub_env.add_repo(
        "acme/tiny-GGUF",
        {
            "tiny-Q8_0.gguf": tiny_gguf("a.gguf", n_ctx_train=2048),
            "tiny-Q4_K_M.gguf": tiny_gguf("b.gguf", seed=2),
        },
    )
    hub_env.add_repo("acme/pair-GGUF", {"p-Q8_0.gguf": b"GGUF-8", "p-F16.gguf": b"GGUF-16"})
    return hub_env


@pytest.mark.slow
def test_pull_ls_rm_round_trip(repo, tmp_path) -> None:
    repo.faults.cut_after["tiny-Q8_0.gguf"] = [250_000]  # a dropped connection is resumed inside
    pulled = kvstudio("pull", "acme/tiny-GGUF:Q8_0", "--progress")
    assert pulled.returncode == 0, pulled.stderr
    path = Path(pulled.stdout.strip())
    assert path.is_file() and path.is_relative_to(tmp_path / "hf-cache")
    assert "100.0%" in pulled.stderr and "Pulling acme/tiny-GGUF tiny-Q8_0.gguf" in pulled.stderr

    again = kvstudio("pull", "acme/tiny-GGUF:Q8_0")
    assert again.returncode == 0 and Path(again.stdout.strip()) == path
    assert again.stderr == ""  # no progress when stderr is not a terminal

    listed = json.loads(kvstudio("ls", "--json").stdout)
    (mine,) = [m for m in listed if m["repo_id"] == "acme/tiny-GGUF"]
    assert (mine["name"], mine["quantization"], mine["context_length"], mine["path"]) == (
        "tiny-Q8_0",
        "Q8_0",
        2048,
        str(path),
    )
    table = kvstudio("ls").stdout
    assert "tiny-Q8_0" in table and "acme/tiny-GGUF" in table and "NAME" in table

    removed = kvstudio("rm", "tiny-Q8_0")
    assert removed.returncode == 0 and "Deleted tiny-Q8_0" in removed.stdout
    assert not path.exists()
    assert all(
        m["repo_id"] != "acme/tiny-GGUF" for m in json.loads(kvstudio("ls", "--json").stdout)
    )


@pytest.mark.slow
def test_pull_into_a_folder(repo, tmp_path) -> None:
    pulled = kvstudio("pull", "acme/tiny-GGUF:tiny-Q4_K_M.gguf", "--folder", str(tmp_path / "lib"))
    assert pulled.returncode == 0, pulled.stderr
    path = tmp_path / "lib" / "acme" / "tiny-GGUF" / "tiny-Q4_K_M.gguf"
    assert Path(pulled.stdout.strip()) == path
    # The folder is the app's from now on: `ls` lists its model with its repo id.
    listed = json.loads(kvstudio("ls", "--json").stdout)
    assert [m["repo_id"] for m in listed if m["path"] == str(path)] == ["acme/tiny-GGUF"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nobody/nothing-GGUF", "No model repository 'nobody/nothing-GGUF'"),
        ("acme/tiny-GGUF:Q2_K", "has no 'Q2_K' GGUF; it has Q4_K_M, Q8_0"),
        ("acme/pair-GGUF", "pick one with acme/pair-GGUF:QUANT (one of F16, Q8_0)"),
        ("not-a-repo", "is not a Hub model"),
    ],
)
def test_pull_bad_requests_fail_in_one_line(repo, spec, message) -> None:
    assert message in one_error_line(kvstudio("pull", spec))


@pytest.mark.slow
def test_pull_gated_and_checksum_fail_in_one_line(repo, tiny_gguf) -> None:
    repo.add_repo("meta/locked-GGUF", {"locked-Q8_0.gguf": tiny_gguf("l.gguf")}, gated=True)
    assert "gated or private" in one_error_line(kvstudio("pull", "meta/locked-GGUF:Q8_0"))

    repo.faults.wrong_sha256("tiny-Q8_0.gguf")
    assert "failed its checksum" in one_error_line(kvstudio("pull", "acme/tiny-GGUF:Q8_0"))
    repo.faults.clear()
    assert all(
        m["repo_id"] != "acme/tiny-GGUF" for m in json.loads(kvstudio("ls", "--json").stdout)
    )


def test_pull_onto_a_full_disk_fails_in_one_line(repo, small_fs, monkeypatch, request) -> None:
    if request.node.callspec.params["small_fs"] == "simulated":
        # The simulated disk patches this process; `pull` runs in another one. The download
        # path meets the simulated disk in tests/core/test_download_faults.py.
        pytest.skip("a simulated small disk cannot reach the kvstudio subprocess")
    monkeypatch.setenv("HF_HUB_CACHE", str(small_fs(128 * 1024)))
    assert "Not enough disk space" in one_error_line(kvstudio("pull", "acme/tiny-GGUF:Q8_0"))


def test_pull_failure_is_exactly_one_line_off_a_terminal(repo) -> None:
    repo.faults.wrong_sha256("tiny-Q8_0.gguf")  # fails after the whole file came
    result = kvstudio("pull", "acme/tiny-GGUF:Q8_0")
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("kvstudio: ") and "failed its checksum" in line


def test_pull_progress_shows_with_the_flag_and_the_error_comes_last(repo) -> None:
    repo.faults.wrong_sha256("tiny-Q8_0.gguf")
    result = kvstudio("pull", "acme/tiny-GGUF:Q8_0", "--progress")
    lines = result.stderr.splitlines()
    assert result.returncode == 2
    assert (
        lines[0].startswith("Pulling acme/tiny-GGUF tiny-Q8_0.gguf") and "100.0%" in result.stderr
    )
    assert "failed its checksum" in lines[-1] and one_error_line(result) == lines[-1]


def test_pull_shows_progress_on_a_terminal(repo) -> None:
    import pty

    main, terminal = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "pull", "acme/tiny-GGUF:Q8_0"],
        cwd=ROOT,
        env=os.environ.copy(),
        stdout=subprocess.PIPE,
        stderr=terminal,
        text=True,
    )
    os.close(terminal)
    shown = b""
    try:
        while chunk := os.read(main, 4096):
            shown += chunk
    except OSError:  # EIO: the child closed the terminal
        pass
    finally:
        os.close(main)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and Path(out.strip()).is_file()
    assert b"Pulling acme/tiny-GGUF" in shown and b"100.0%" in shown


def test_pull_into_an_unwritable_place_is_one_line(repo, tmp_path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    message = one_error_line(kvstudio("pull", "acme/tiny-GGUF:Q8_0", "--folder", str(blocker)))
    assert str(blocker) in message


@pytest.mark.slow
def test_rm_refuses_ambiguous_and_unknown_names(hub_env, tiny_gguf, tmp_path) -> None:
    for folder in ("x", "y"):
        (tmp_path / folder).mkdir()
        tiny_gguf(f"{folder}.gguf").rename(tmp_path / folder / "same-Q8_0.gguf")
    message = one_error_line(
        kvstudio("rm", "same-Q8_0", "--dir", str(tmp_path / "x"), "--dir", str(tmp_path / "y"))
    )
    assert "matches 2 models" in message
    assert (tmp_path / "x" / "same-Q8_0.gguf").exists() and (
        tmp_path / "y" / "same-Q8_0.gguf"
    ).exists()
    assert "No model named 'ghost'" in one_error_line(kvstudio("rm", "ghost"))
