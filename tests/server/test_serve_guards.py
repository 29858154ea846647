"""`kvstudio serve`'s guards as a user meets them in the terminal: --allowed-hosts, and one line
(no traceback) for a client that leaves in the middle of its upload."""

from __future__ import annotations

import http.client
import os
import queue
import signal
import socket
import subprocess
import sys
import threading

import pytest

from tests.cli_runner import ROOT, assert_bad_input, kvstudio
from tests.waits import HANG_GUARD_S

pytestmark = pytest.mark.slow


def _status(port: int, host: str) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=HANG_GUARD_S)
    try:
        connection.request("GET", "/v1/models", headers={"Host": host})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def _lines(stream: object) -> queue.Queue[str]:
    """The stream's lines as they come, on a thread of their own (so a wait has a ceiling)."""
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in stream:  # type: ignore[attr-defined]
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _wait_for_line(lines: queue.Queue[str], words: str, seen: list[str]) -> str:
    for _ in range(1000):  # bounded: each get has the hang guard as its ceiling
        line = lines.get(timeout=HANG_GUARD_S)
        seen.append(line)
        if words in line:
            return line
    raise AssertionError(f"no line with {words!r} in {seen}")


def test_serve_answers_allowed_hosts_and_logs_a_broken_upload_in_one_line():
    command = [sys.executable, "-m", "app", "serve", "starter", "--port", "0", "--ctx", "512"]
    process = subprocess.Popen(
        [*command, "--allowed-hosts", "kvstudio.lan"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    seen: list[str] = []
    try:
        first = process.stdout.readline()  # printed once the model is loaded and the port bound
        port = int(first.rsplit(":", 1)[1].split("/")[0])
        errors = _lines(process.stderr)
        assert _status(port, f"kvstudio.lan:{port}") == 200
        assert _status(port, f"attacker.example:{port}") == 403
        _wait_for_line(errors, "GET /v1/models 403: ", seen)
        with socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD_S) as leaving:
            leaving.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
                b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{}"
            )
        _wait_for_line(errors, "went away", seen)
        assert _status(port, "localhost") == 200  # and it still answers
        process.send_signal(signal.SIGINT)
        process.wait(timeout=HANG_GUARD_S)
        _wait_for_line(errors, "kvstudio: stopped", seen)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = "".join(seen)
    assert "Traceback" not in text, text
    assert [line for line in seen if "went away" in line] == [
        "POST /v1/chat/completions 499: the client went away before its whole body\n"
    ]


def test_serve_refuses_an_allowed_host_that_is_not_a_name():
    result = kvstudio("serve", "starter", "--allowed-hosts", "http://kvstudio.lan")
    assert_bad_input(result, "is not a host name like kvstudio.lan")
