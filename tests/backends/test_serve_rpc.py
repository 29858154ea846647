"""`kvstudio serve --rpc`: the OpenAI-compatible server on a model split across two real
`kvstudio worker`s on 127.0.0.1, checked before the load as `kvstudio run --rpc` is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from openai import OpenAI

from tests.backends.rpc_worker_fixtures import workers
from tests.cli_runner import ROOT, assert_bad_input, kvstudio

pytestmark = pytest.mark.slow


def test_serve_across_two_workers_answers_a_chat_completion(cpu_chosen):
    with workers(cpu_chosen, 2) as (a, b):
        process = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "starter", "--port", "0", "--ctx", "512"]
            + ["--rpc", f"{a.address},{b.address}"]
            + ["--allow-chat-on-base-model"],  # the starter is a base model
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=dict(os.environ, PYTHONPATH=str(ROOT), KVSTUDIO_DATA_DIR=str(cpu_chosen)),
        )
        try:
            first = process.stdout.readline()  # once the model is loaded and the port bound
            assert first.startswith("Serving gemma-3-270m-q4_k_m (KV q8_0/f16) at http://"), (
                first + process.stderr.read() if not first else first
            )
            client = OpenAI(base_url=first.split(" at ")[1].strip(), api_key="none", timeout=120)
            answer = client.chat.completions.create(
                model="gemma-3-270m-q4_k_m",
                messages=[{"role": "user", "content": "Say hello."}],
                max_tokens=8,
                temperature=0,
            )
            assert answer.choices[0].message.content.strip()
            assert answer.usage.completion_tokens > 0
            process.send_signal(signal.SIGINT)
            _out, err = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert process.returncode == 130, err
    assert "served 1 request(s)" in err and "Traceback" not in err


def test_serve_refuses_a_worker_that_does_not_answer(cpu_chosen):
    result = kvstudio(
        "serve", "starter", "--rpc", "127.0.0.1:1", env={"KVSTUDIO_DATA_DIR": str(cpu_chosen)}
    )
    assert_bad_input(result, "The worker at 127.0.0.1:1 does not answer (nothing listens")
