"""`kvstudio serve` as a user runs it: a real process, the real `openai` client, Ctrl+C."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import psutil
import pytest
from openai import OpenAI

from tests.cli_runner import ROOT, assert_bad_input, kvstudio

# Over a second per test on 2 cores: in the full suite, not the fast tier (docs/testing.md).
pytestmark = pytest.mark.slow


@pytest.mark.slow
def test_serve_starter_answers_a_streamed_chat_and_stops_on_ctrl_c():
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "starter", "--port", "0", "--ctx", "1024"]
        + ["--allow-chat-on-base-model"],  # the starter is a base model
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    try:
        first = process.stdout.readline()  # printed once the model is loaded and the port bound
        assert first.startswith("Serving gemma-3-270m-q4_k_m (KV q8_0/f16) at http://127.0.0.1:")
        base_url = first.split(" at ")[1].strip()
        engine = [  # the engine child, not multiprocessing's resource tracker
            child
            for child in psutil.Process(process.pid).children()
            if "spawn_main" in " ".join(child.cmdline())
        ]
        client = OpenAI(base_url=base_url, api_key="none", max_retries=0, timeout=120)
        chunks = client.chat.completions.create(
            model="gemma-3-270m-q4_k_m",
            messages=[{"role": "user", "content": "Say hello."}],
            max_tokens=8,
            temperature=0,
            stream=True,
        )
        assert "".join(c.choices[0].delta.content or "" for c in chunks).strip()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, err
    assert "Traceback" not in err
    assert "kvstudio: stopped; served 1 request(s), 8 token(s) generated." in err
    assert len(engine) == 1
    _gone, alive = psutil.wait_procs(engine, timeout=5)
    assert not alive, "the engine outlived kvstudio serve"


def test_serve_refuses_bad_input_in_one_sentence(tmp_path):
    assert_bad_input(kvstudio("serve", "starter", "--host", "0.0.0.0"), "needs an API key")
    assert_bad_input(kvstudio("serve", "starter", "--port", "70000"), "between 1 and 65535")
    assert_bad_input(kvstudio("serve", str(tmp_path / "none.gguf")), "none.gguf")


def test_serve_says_when_the_port_is_taken(random_gguf):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        result = kvstudio("serve", str(random_gguf), "--port", port)
    assert_bad_input(result, f"Port {port} on 127.0.0.1 is in use")
