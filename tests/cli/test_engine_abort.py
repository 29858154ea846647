"""When llama.cpp gives up, `kvstudio run --json` prints nothing on stdout and one line on
stderr that quotes the assert; a file llama.cpp refuses gets its reason, not only "failed to
load model".

Before: ggml's abort handler attached gdb and ~85 lines of backtrace reached the CLI's stdout
(the engine shared it), the crash report's tail held only backtrace, and the message was on
stderr twice (a log warning and the CLI's line)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from app.engine.process import EngineProcess
from tests import abort_engine
from tests.cli_runner import ROOT, kvstudio
from tests.engine_threads import ENGINE_THREADS
from tests.gguf_factory import write_tiny_gguf, write_unknown_arch_gguf

AREA = "Kills and crashes"
# `kvstudio ARGS` whose engine aborts on Load (tests/abort_engine.py): the real CLI, with only
# the engine's entry point wrapped.
DRIVER = """
import sys
import app.engine.process as process
from app.cli import main
from tests import abort_engine

real_init = process.EngineProcess.__init__
def aborting_init(self, target=None, backends=None):
    real_init(self, abort_engine.main, backends)
process.EngineProcess.__init__ = aborting_init
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_run_json_when_llama_cpp_aborts_prints_one_line_and_nothing_on_stdout(
    tmp_path, reliability
) -> None:
    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    result = subprocess.run(
        [sys.executable, "-c", DRIVER, "run", str(model), "-p", "hi", "--json", "--ctx", "256"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert result.returncode == 1, result
    assert result.stdout == ""  # nothing from the engine or its debugger
    assert result.stderr.splitlines() == [
        f"kvstudio: The engine stopped (killed by signal 6, SIGABRT): llama.cpp gave up at "
        f"{abort_engine.SAID}."
    ]
    reliability.record(AREA, "llama.cpp aborts (SIGABRT) through `run --json`", 1)
    reliability.record(
        AREA, "after an abort", "stdout empty, one stderr line quoting the assert, exit 1"
    )


def test_crash_report_names_the_assert_and_holds_no_backtrace(tmp_path, capfd) -> None:
    proc = EngineProcess(target=abort_engine.main)
    try:
        from app.engine.messages import Load
        from app.load.profile import LoadProfile
        from app.platform.errors import EngineCrashedError

        proc.send(Load(LoadProfile(model_path=str(write_tiny_gguf(tmp_path / "t.gguf")))))
        try:
            while True:
                proc.recv(timeout=60)
        except EngineCrashedError as crash:
            message = str(crash)
        tail = proc.stderr_tail(lines=200)
    finally:
        proc.stop()
    assert message.count("GGML_ASSERT") == 1 and "\n" not in message
    assert abort_engine.SAID in tail
    assert "gdb" not in tail and "#0 " not in tail  # ggml's debugger backtrace is off
    out, _ = capfd.readouterr()
    assert out == ""  # the engine's fd 1 is not this process's stdout


@pytest.mark.slow
def test_a_file_llama_cpp_refuses_gets_its_reason(tmp_path) -> None:
    model = write_unknown_arch_gguf(tmp_path / "strange.gguf")
    result = kvstudio("run", str(model), "-p", "hi", "--ctx", "256")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "kvstudio: llama.cpp could not load strange.gguf: "
        "unknown model architecture: 'strangearch'."
    ]


def test_a_context_llama_cpp_cannot_allocate_is_reported_in_words(
    starter_model_path, reliability
) -> None:
    # --force passes the fit check, and a 3 GiB address-space cap (RLIMIT_AS, what a small
    # machine's memory would do) makes llama.cpp's allocation of a million-token context fail.
    # This already held when written (the loader's reason line); it guards the engine's words.
    def cap_memory() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    result = subprocess.run(
        [sys.executable, "-m", "app", "run", str(starter_model_path), "-p", "hi", "--json"]
        + ["--ctx", "1000000", "--force", "--threads", str(ENGINE_THREADS)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        preexec_fn=cap_memory,
    )
    assert result.returncode == 1 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("kvstudio: llama.cpp could not load gemma-3-270m") and "alloc" in line
    reliability.record(AREA, "a context llama.cpp cannot allocate (3 GiB cap, --force)", line)
