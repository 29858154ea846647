"""The nastiest 100 hostile GGUFs (tests/hostile_gguf.py: those that used to hang, crash,
abort llama.cpp or pass as a model) through `kvstudio fit FILE` and `kvstudio run FILE`: exit
2, one line on stderr, no traceback, and no engine process started. In-process through
app.cli.main for all 100, and as real subprocesses for a handful."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from tests.cli_runner import assert_bad_input, kvstudio
from tests.gguf_factory import write_tiny_gguf
from tests.hostile_gguf import Case, corpus, nastiest

AREA = "Hostile GGUF files"


@pytest.fixture(scope="module")
def nasty_files(tmp_path_factory) -> list[tuple[Case, Path]]:
    folder = tmp_path_factory.mktemp("nasty")
    out = []
    for i, case in enumerate(nastiest(corpus(tmp_path_factory.mktemp("bases")))):
        path = folder / f"nasty-{i:03d}.gguf"
        path.write_bytes(case.data)
        out.append((case, path))
    return out


@pytest.fixture
def no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if anything tries to start an engine process."""
    import app.engine.process as process

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("an engine process was started for a hostile file")

    monkeypatch.setattr(process.EngineProcess, "__init__", refuse)


@pytest.mark.slow
def test_nastiest_100_exit_2_in_one_line(nasty_files, capsys, no_engine, reliability) -> None:
    assert len(nasty_files) == 100
    runs = 0
    for case, path in nasty_files:
        for argv in (["fit", str(path)], ["run", str(path), "-p", "hi", "-n", "1"]):
            code = main(argv)
            out, err = capsys.readouterr()
            lines = err.strip().splitlines()
            assert code == 2, (case.name, argv[0], err)
            assert len(lines) == 1 and lines[0].startswith("kvstudio: "), (case.name, err)
            assert "Traceback" not in err and out == "", (case.name, out)
            runs += 1
    severity = {
        k: sum(c.used_to.startswith(k) for c, _ in nasty_files)
        for k in ("hang", "crash", "abort", "accepted")
    }
    reliability.record(
        AREA,
        "CLI: the nastiest 100 through `kvstudio fit` and `kvstudio run`",
        f"{runs} runs, each exit 2 in one line, no engine started; before, these 100 were "
        f"{severity['hang']} hangs, {severity['crash']} crashes, {severity['abort']} llama.cpp "
        f"aborts and {severity['accepted']} files passed as models",
    )


@pytest.mark.slow
@pytest.mark.parametrize("index", [0, 1, 13, 20, 99])
def test_hostile_files_as_a_user_runs_them(nasty_files, index) -> None:
    case, path = nasty_files[index]
    for args in (("fit", str(path)), ("run", str(path), "-p", "hi")):
        result = kvstudio(*args, timeout=120)
        assert_bad_input(result, "GGUF")


def test_ls_lists_good_models_beside_bad_ones(nasty_files, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("KVSTUDIO_DATA_DIR", str(tmp_path / "data"))
    folder = tmp_path / "models"
    folder.mkdir()
    good = write_tiny_gguf(folder / "good-model.gguf", n_layer=2)
    for _case, path in nasty_files:
        (folder / path.name).write_bytes(path.read_bytes())
    assert main(["ls", "--json", "--dir", str(folder)]) == 0
    listed = {Path(m["path"]).name: m for m in json.loads(capsys.readouterr().out)}
    assert listed[good.name]["error"] is None and listed[good.name]["architecture"] == "llama"
    bad = [m for name, m in listed.items() if name.startswith("nasty-")]
    assert len(bad) == 100 and all(m["error"] and "\n" not in m["error"] for m in bad)
    assert main(["ls", "--dir", str(folder)]) == 0
    table = capsys.readouterr().out
    rows = table.splitlines()
    assert any(r.startswith("good-model ") for r in rows)
    assert sum(r.startswith("nasty-") for r in rows) == 100  # one row each, reason beside it
