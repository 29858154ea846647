"""/v1/embeddings through the real server and the real openai client: on a model llama.cpp
embeds with (a tiny random Llama), the vectors are the ones llama-cpp-python computes for the
same file, in OpenAI's shapes, float or base64, for strings and token arrays; bad input is a
400 naming it; the starter (Gemma 3) embeds too; when the embedder process dies on a model
(here: llama.cpp cannot allocate under the engine's memory ceiling) the request is refused in one
sentence, later ones at once, and chat and completions go on."""

from __future__ import annotations

import base64
import math
import multiprocessing
import struct

import httpx2
import llama_cpp
import openai
import pytest
from openai import OpenAI

from tests.server.served import serve

pytestmark = pytest.mark.slow

TEXTS = ["The cat sat on the mat.", "Stock prices fell sharply on Monday."]


def _client(base_url: str) -> OpenAI:
    return OpenAI(base_url=base_url, api_key="not-needed", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def reference(random_gguf):
    """llama-cpp-python's own embeddings of the same file, in this process."""
    llm = llama_cpp.Llama(
        str(random_gguf),
        n_ctx=512,
        n_batch=512,
        n_ubatch=512,
        n_gpu_layers=0,
        embedding=True,
        pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN,
        verbose=False,
    )
    yield llm
    llm.close()


def _close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(
        math.isclose(x, y, abs_tol=1e-4) for x, y in zip(a, b, strict=True)
    )


def test_embeddings_are_llama_cpps_for_the_loaded_file(tiny_server, reference):
    client = _client(tiny_server.base_url)
    reply = client.embeddings.create(model="any", input=TEXTS, encoding_format="float")
    assert reply.object == "list" and [d.index for d in reply.data] == [0, 1]
    for text, item in zip(TEXTS, reply.data, strict=True):
        assert item.object == "embedding"
        assert _close(item.embedding, reference.embed(text, normalize=True))
        assert math.isclose(math.fsum(x * x for x in item.embedding), 1.0, rel_tol=1e-4)
    tokens = [len(reference.tokenize(t.encode())) for t in TEXTS]
    assert reply.usage.prompt_tokens == reply.usage.total_tokens == sum(tokens)
    one = client.embeddings.create(model="any", input=TEXTS[1], encoding_format="float")
    assert _close(one.data[0].embedding, reply.data[1].embedding)  # a batch changes nothing


def test_token_arrays_and_base64_give_the_same_vectors(tiny_server, reference):
    url = f"{tiny_server.base_url}/embeddings"
    ids = reference.tokenize(TEXTS[0].encode())
    as_text = httpx2.post(url, json={"model": "any", "input": TEXTS[0]}, timeout=120).json()
    as_ids = httpx2.post(url, json={"model": "any", "input": [ids]}, timeout=120).json()
    as_b64 = httpx2.post(
        url, json={"model": "any", "input": ids, "encoding_format": "base64"}, timeout=120
    ).json()
    floats = as_text["data"][0]["embedding"]
    assert as_ids["data"][0]["embedding"] == floats
    raw = base64.b64decode(as_b64["data"][0]["embedding"])
    assert list(struct.unpack(f"<{len(raw) // 4}f", raw)) == floats
    # the openai client asks for base64 by default and decodes it
    decoded = _client(tiny_server.base_url).embeddings.create(model="any", input=TEXTS[0])
    assert _close(decoded.data[0].embedding, floats)


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"input": ""}, "input"),
        ({"input": ["fine", ""]}, "input[1]"),
        ({"input": [[1, 2], "x", 3]}, "input[2]"),
        ({"input": "x", "dimensions": 8}, "dimensions"),
        ({"input": "x", "encoding_format": "int8"}, "encoding_format"),
        ({"input": ["x"] * 2049}, "input"),
        ({"input": [10**9]}, "input"),
        ({"input": "word " * 600}, "input"),
    ],
)
def test_input_that_cannot_be_embedded_is_a_400_naming_it(tiny_server, fields, param):
    reply = httpx2.post(
        f"{tiny_server.base_url}/embeddings", json={"model": "any", **fields}, timeout=120
    )
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == param


def test_the_starter_embeds(starter_model_path):
    with serve(starter_model_path, n_ctx=512) as served:
        reply = _client(served.base_url).embeddings.create(model="any", input="Hello")
    vector = reply.data[0].embedding
    assert len(vector) == 640  # Gemma 3 270M's embedding width
    assert math.isclose(math.fsum(x * x for x in vector), 1.0, rel_tol=1e-4)


def test_an_embedder_that_dies_on_a_model_is_refused_and_chat_goes_on(
    starter_model_path, monkeypatch
):
    with serve(starter_model_path, n_ctx=512) as served:
        # The engine is loaded; the embedder starts at the first request under a ceiling far
        # below what llama.cpp needs, and dies on it as it would on a model it crashes on.
        monkeypatch.setenv("KVSTUDIO_ENGINE_MEMORY_LIMIT", "64MiB")
        client = _client(served.base_url)
        for _ in range(2):  # the second is refused without trying again
            with pytest.raises(openai.BadRequestError) as refused:
                client.embeddings.create(model="any", input="Hello")
            assert refused.value.status_code == 400
            assert refused.value.code == "embeddings_unsupported"
            assert "chat and completions are not affected" in refused.value.message
        reply = client.completions.create(model="any", prompt="Once upon", max_tokens=2)
        assert reply.usage.completion_tokens == 2


def test_the_embedder_process_starts_with_the_first_request_and_stops_with_the_server(
    random_gguf,
):
    def embedders() -> set[int | None]:  # other servers' (this module's tiny_server) count too
        children = multiprocessing.active_children()
        return {p.pid for p in children if p.name == "kvstudio-embedder"}

    before = embedders()
    with serve(random_gguf, n_ctx=512) as served:
        assert embedders() == before  # nothing until embeddings are asked for
        _client(served.base_url).embeddings.create(model="any", input="Hello")
        started = embedders() - before
        assert len(started) == 1
    assert not started & embedders()
