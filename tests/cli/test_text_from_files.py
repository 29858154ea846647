"""Text a GGUF's author wrote (general.name, file names) reaches the terminal cleaned and cut:
no escape sequence (they retitled the window and cleared the screen), no bidi override, and
a 300 KB name costs one short line (it printed 6,429 terminal lines before)."""

from __future__ import annotations

from pathlib import Path

from tests.cli_runner import kvstudio
from tests.gguf_factory import write_tiny_gguf

AREA = "Templates and text from files"
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1b[31m<b>bold</b><img src=http://x/y.png>\u202eevil\x9b1m"
LONG = "N" * 300_000


def _isolated(tmp_path: Path) -> dict[str, str]:
    return {
        "KVSTUDIO_DATA_DIR": str(tmp_path / "data"),
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_CACHE": str(tmp_path / "hf" / "hub"),
    }


def _assert_shown_safely(output: str, max_lines: int, max_chars: int = 400) -> None:
    assert "\x1b" not in output and "\x9b" not in output and "\x07" not in output
    assert "\u202e" not in output
    lines = output.splitlines()
    assert len(lines) <= max_lines, len(lines)
    assert max(len(line) for line in lines) <= max_chars


def test_fit_shows_a_hostile_model_name_cleaned_and_cut(tmp_path, reliability):
    path = write_tiny_gguf(tmp_path / "named.gguf", name=HOSTILE + LONG)
    result = kvstudio("fit", str(path), env=_isolated(tmp_path))
    assert result.returncode == 0, result.stderr
    _assert_shown_safely(result.stdout + result.stderr, max_lines=20)
    first = result.stdout.splitlines()[0]
    assert "<b>bold</b><img src=http://x/y.png>" in first  # the words stay, as text
    assert "…" in first
    reliability.record(
        AREA,
        "CLI: a 300 KB model name with escapes, lines printed by fit",
        len(result.stdout.splitlines()),
    )


def test_ls_shows_hostile_file_names_cleaned(tmp_path, reliability):
    folder = tmp_path / "models"
    folder.mkdir()
    write_tiny_gguf(folder / f"{HOSTILE.replace('/', '_')}.gguf")
    write_tiny_gguf(folder / ("L" * 250 + ".gguf"))  # near the file system's 255-byte limit
    result = kvstudio("ls", "--dir", str(folder), env=_isolated(tmp_path))
    assert result.returncode == 0, result.stderr
    # a row: name (80) + path (300) + the columns between
    _assert_shown_safely(result.stdout + result.stderr, max_lines=4, max_chars=600)
    assert "<b>bold<_b>" in result.stdout  # the name as written ("/" cannot be in one)
    reliability.record(
        AREA,
        "CLI: ls lines for hostile file names (escapes, bidi, 250 chars)",
        len(result.stdout.splitlines()),
    )
