"""What the commands print from a file, a package or a model reaches the terminal cleaned and
short: `run`'s streamed reply (a model can write escape codes), the `kvstudio: ...` error line,
`backend ls` / `verify` (a manifest's words), `doctor` (a package's problem) and `fit --json`
(a 300 KB name cut; JSON escaping keeps the escapes off the terminal). Before, each printed
the text as it came: the escapes ran, and a 300 KB name was one 300 KB line."""

from __future__ import annotations

import json
import shutil

import pytest

from app.backends.manifest import MANIFEST_NAME
from app.cli import main
from tests.backends.package_edits import copy_package, repack, sign
from tests.cli_runner import kvstudio
from tests.gguf_factory import write_tiny_gguf
from tests.hostile_text import HOSTILE, HTML, LONG, assert_clean

AREA = "Templates and text from files"


# Words whose every token writes escapes: a sampled reply is made of them and byte tokens.
@pytest.fixture(autouse=True)
def _own_data_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("KVSTUDIO_DATA_DIR", str(tmp_path / "data"))


ESCAPE_WORDS = [f"\x1b]0;t{i}\x07\x1b[{i % 8 + 30}m\u202ew{i}\x1b[2J" for i in range(200)]


@pytest.mark.slow
def test_run_streams_a_reply_of_escape_codes_as_text(tmp_path, capsys, reliability):
    model = write_tiny_gguf(tmp_path / "escapes.gguf", vocab=ESCAPE_WORDS)
    args = ["run", str(model), "-p", "hi", "-n", "48", "--ctx", "256", "--seed", "1"]
    assert main([*args, "--temp", "1.0"]) == 0
    out = capsys.readouterr().out
    assert_clean(out, max_lines=60, max_chars=5000)
    assert "]0;t" in out and "[2J" in out  # the reply came, its escapes as plain words
    assert main([*args, "--temp", "1.0", "--json"]) == 0
    raw = capsys.readouterr().out
    assert "\x1b" not in raw  # JSON escapes it: \u001b, the reply kept whole for scripts
    assert "\x1b" in json.loads(raw)["text"]
    reliability.record(AREA, "CLI: run with a model whose tokens are escape codes", "shown as text")


def test_an_error_quoting_a_hostile_long_path_is_one_short_line(tmp_path, capsys, reliability):
    # 3,000 characters (the system refuses longer paths), escapes and markup in each folder
    deep = tmp_path.joinpath(*[HOSTILE + "N" * 150] * 15, "model.gguf")
    assert main(["fit", str(deep)]) == 2
    err = capsys.readouterr().err
    assert_clean(err, max_lines=1, max_chars=1010)
    assert err.startswith("kvstudio: ") and HTML in err
    reliability.record(AREA, "CLI: error line quoting a 3,000-character hostile path", len(err))


def test_fit_json_cuts_a_300_kb_name_and_escapes_the_rest(tmp_path, capsys):
    path = write_tiny_gguf(tmp_path / "named.gguf", name=HOSTILE + LONG)
    assert main(["fit", str(path), "--json"]) == 0
    raw = capsys.readouterr().out
    assert "\x1b" not in raw and len(raw) < 20_000
    name = json.loads(raw)["model"]["name"]
    assert name.startswith(HOSTILE) and name.endswith("…") and len(name) == 1000


@pytest.mark.slow
def test_backend_ls_verify_and_doctor_show_a_hostile_manifest_cleaned(
    data_folder, cpu_package, tmp_path, reliability
):
    folder = copy_package(cpu_package, tmp_path)
    manifest = json.loads((folder / MANIFEST_NAME).read_text())
    manifest["summary"] = HOSTILE + LONG
    manifest["build"]["note"] = HOSTILE + LONG
    manifest["gpu_targets"] = [HOSTILE]
    (folder / MANIFEST_NAME).write_text(json.dumps(manifest))
    sign(folder)  # a package signed as it is: only its text is hostile
    env = {"KVSTUDIO_DATA_DIR": str(data_folder)}
    added = kvstudio("backend", "add", str(repack(folder, tmp_path / "h.tar.gz")), "--use", env=env)
    assert added.returncode == 0, added.stderr[:500]
    shutil.rmtree(folder)

    listed = kvstudio("backend", "ls", env=env)
    assert_clean(listed.stdout + listed.stderr, max_lines=3, max_chars=400)
    assert HTML in listed.stdout and "…" in listed.stdout
    verified = kvstudio("backend", "verify", env=env)
    assert verified.returncode == 0, verified.stderr[:500]
    assert_clean(verified.stdout + verified.stderr, max_lines=20, max_chars=300)
    assert f"note: {HTML}" in verified.stdout

    # A file the manifest does not name, named by its author: the engine falls back, and
    # doctor's notice quotes the name.
    (data_folder / "backends" / "cpu" / HOSTILE).write_bytes(b"x")
    doctor = kvstudio("doctor", env=env)
    assert doctor.returncode == 0, doctor.stderr[:500]
    assert_clean(doctor.stdout + doctor.stderr, max_lines=40, max_chars=1000)
    assert f"{HTML}?]0;pwned" in doctor.stdout
    reliability.record(
        AREA,
        "CLI: backend ls / verify / doctor with a 300 KB manifest summary and note with escapes",
        f"{len(listed.stdout.splitlines())} / {len(verified.stdout.splitlines())} / "
        f"{len(doctor.stdout.splitlines())} lines",
    )
