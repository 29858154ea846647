"""The server's queue, cancel, limits, errors and key, on a tiny random-weight model (its text
is nonsense, but it is the same text each time at temperature 0, and it comes fast)."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import openai
import pytest
from openai import OpenAI

from app.platform.errors import BadInputError
from app.server.options import ServerOptions, check_options

HELLO = [{"role": "user", "content": "hello"}]


def _client(base_url: str, key: str = "none") -> OpenAI:
    return OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=60)


def _post(url: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(
        url, data=body, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_client_that_goes_away_frees_the_engine_within_a_second(tiny_server):
    client = _client(tiny_server.base_url)
    stream = client.chat.completions.create(
        model="any", messages=HELLO, max_tokens=4000, temperature=0, stream=True
    )
    for _, _chunk in zip(range(4), stream, strict=False):
        pass
    stream.close()
    gone = time.monotonic()
    record = tiny_server.records.wait_for(lambda r: r.finish_reason == "cancelled")
    # ended_at is the engine's clock (time.monotonic(), one clock for the machine)
    assert record.ended_at - gone < 1.0
    assert 0 < record.completion_tokens < 4000
    # The engine is free: the next request runs to its own end, not cut off as cancelled. Its
    # length is not asserted: the random model samples its end token now and then (7 of 300
    # such replies ended at once, 1 after 2 tokens), which is a finished reply all the same.
    after = client.chat.completions.create(model="any", messages=HELLO, max_tokens=3)
    done = tiny_server.records.wait_for(lambda r: r.request_id == after.id)
    assert done.finish_reason in ("length", "stop"), done
    assert done.completion_tokens == after.usage.completion_tokens <= 3
    if done.finish_reason == "length":
        assert after.usage.completion_tokens == 3


def test_two_clients_at_once_are_answered_in_turn_each_correctly(tiny_server):
    client = _client(tiny_server.base_url)
    asks = {"a": "first question", "b": "another, longer question here"}

    def ask(text: str, stream: bool) -> str:
        messages = [{"role": "user", "content": text}]
        if not stream:
            reply = client.chat.completions.create(
                model="any", messages=messages, max_tokens=40, temperature=0
            )
            return reply.choices[0].message.content or ""
        chunks = client.chat.completions.create(
            model="any", messages=messages, max_tokens=40, temperature=0, stream=True
        )
        return "".join(c.choices[0].delta.content or "" for c in chunks)

    alone = {key: ask(text, stream=False) for key, text in asks.items()}
    assert alone["a"] != alone["b"]
    together: dict[str, str] = {}
    threads = [
        threading.Thread(target=lambda k=key, t=text: together.__setitem__(k, ask(t, True)))
        for key, text in asks.items()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    # Interleaved tokens would mix the two replies; queued, each is what it is alone.
    assert together == alone


def test_bad_requests_get_openai_shaped_errors_with_the_right_status(tiny_server):
    client = _client(tiny_server.base_url)
    with pytest.raises(openai.BadRequestError) as wrong_type:
        client.chat.completions.create(model="any", messages=HELLO, max_tokens="5")  # type: ignore[arg-type]
    assert wrong_type.value.status_code == 400
    assert wrong_type.value.body["param"] == "max_tokens"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError, match="temperature"):
        client.chat.completions.create(model="any", messages=HELLO, temperature=9)
    with pytest.raises(openai.BadRequestError, match="role"):
        client.chat.completions.create(model="any", messages=[{"role": "robot", "content": "x"}])  # type: ignore[list-item]
    with pytest.raises(openai.BadRequestError, match="at most 4096"):
        client.completions.create(model="any", prompt="x", max_tokens=100_000)

    url = tiny_server.base_url + "/chat/completions"
    status, body = _post(url, json.dumps({"messages": HELLO}).encode())
    assert status == 400 and body["error"]["param"] == "model"
    assert body["error"]["type"] == "invalid_request_error" and body["error"]["message"]
    status, body = _post(url, b"{not json")
    assert status == 400 and "JSON" in body["error"]["message"]
    big = json.dumps({"model": "any", "messages": HELLO, "pad": "x" * 100_000}).encode()
    status, body = _post(url, big)
    assert status == 413 and "at most 65,536" in body["error"]["message"]
    status, body = _post(tiny_server.base_url + "/audio/speech", b"{}")
    assert status == 404 and "/v1/chat/completions" in body["error"]["message"]


def test_with_a_key_set_a_wrong_or_missing_key_is_refused(tiny_server):
    with tiny_server.another(api_key="s3cret-key") as keyed:
        with pytest.raises(openai.AuthenticationError) as wrong:
            _client(keyed.base_url, "wrong").models.list()
        assert wrong.value.status_code == 401 and "s3cret" not in str(wrong.value.body)
        status, body = _post(keyed.base_url + "/completions", b"{}")
        assert status == 401 and body["error"]["code"] == "missing_api_key"
        reply = _client(keyed.base_url, "s3cret-key").completions.create(
            model="any", prompt="hi", max_tokens=2
        )
        # answered (the random model may end its sampled reply sooner than 2 tokens)
        assert reply.object == "text_completion" and reply.usage.completion_tokens <= 2


def test_another_interface_needs_a_key():
    with pytest.raises(BadInputError, match="needs an API key"):
        check_options(ServerOptions(host="0.0.0.0"))
    check_options(ServerOptions(host="0.0.0.0", api_key="k"))
    check_options(ServerOptions(host="localhost"))


def test_the_log_keeps_no_prompt_text_unless_asked(tiny_server, caplog):
    secret = "my private prompt words"
    caplog.set_level("DEBUG")
    _client(tiny_server.base_url).completions.create(model="any", prompt=secret, max_tokens=2)
    record = tiny_server.records.wait_for(lambda r: r.path.endswith("/completions"))
    assert record.prompt == "" and secret not in caplog.text
    with tiny_server.another(log_prompts=True) as logged:
        _client(logged.base_url).completions.create(model="any", prompt=secret, max_tokens=2)
        assert logged.records.wait_for(lambda r: True).prompt == secret
