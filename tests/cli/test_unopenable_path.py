"""A model path the system cannot even look up (a name longer than the file system allows) is bad
input in one sentence, exit 2, with no crash report; it used to end as "unexpected error
(OSError: File name too long)" and leave a crash report behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_runner import assert_bad_input, kvstudio


@pytest.mark.parametrize("command", ["fit", "run"])
def test_a_name_too_long_for_the_file_system_is_one_sentence(command: str, tmp_path: Path) -> None:
    path = tmp_path / ("a" * 300 + ".gguf")
    args = [command, str(path), *(["-p", "hi"] if command == "run" else [])]
    result = kvstudio(*args, env={"KVSTUDIO_DATA_DIR": str(tmp_path / "data")})
    assert_bad_input(result, "cannot be opened: File name too long")
    assert not list((tmp_path / "data").glob("logs/crash-*"))
