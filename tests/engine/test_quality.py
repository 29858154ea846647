"""Quality (perplexity, KL divergence, top-1) and the depth bench, in-process on the real
starter model: the same functions the engine worker dispatches Evaluate and Bench to."""

from __future__ import annotations

import math
import tracemalloc

import llama_cpp  # before numpy (docs/llama-cpp-notes.md: import order is load-bearing)
import numpy as np
import pytest

from app.core.errors import BadInputError, EngineFailedError
from app.engine.bench import run_bench
from app.engine.messages import Bench, Evaluate
from app.engine.quality import default_reference_text, evaluate

pytestmark = pytest.mark.slow
CHUNK = 256
N_CHUNKS = 2


def _llm(path, k: str, v: str):
    types = {"f16": llama_cpp.GGML_TYPE_F16, "q8_0": llama_cpp.GGML_TYPE_Q8_0}
    return llama_cpp.Llama(str(path), n_ctx=1024, flash_attn=True, type_k=types[k], type_v=types[v],
                           n_threads=2, verbose=False)


@pytest.fixture(scope="module")
def text() -> str:
    return default_reference_text()


@pytest.fixture(scope="module")
def reference(starter_model_path, text, tmp_path_factory):
    """The f16/f16 reference run: its result and the log-probability file it wrote."""
    path = tmp_path_factory.mktemp("quality") / "ref.npy"
    llm = _llm(starter_model_path, "f16", "f16")
    try:
        tracemalloc.start()
        result = evaluate(llm, Evaluate("ref", text, CHUNK, N_CHUNKS, str(path), write_reference=True))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        again = evaluate(llm, Evaluate("same", text, CHUNK, N_CHUNKS, str(path)))
    finally:
        llm.close()
    return {"result": result, "path": path, "peak": peak, "again": again}


def test_reference_run_scores_the_second_half_of_each_chunk(reference, starter_model_path):
    result = reference["result"]
    assert result.scored_tokens == N_CHUNKS * (CHUNK - CHUNK // 2 - 1)
    assert math.isfinite(result.perplexity) and 1.0 < result.perplexity < 200
    assert result.mean_kl_divergence is None and result.top1_agreement is None
    logprobs = np.load(reference["path"], mmap_mode="r")
    assert logprobs.shape == (result.scored_tokens, 262144) and logprobs.dtype == np.float16
    # Each row is a log-probability distribution.
    assert abs(np.exp(logprobs[0].astype(np.float64)).sum() - 1.0) < 0.01


def test_logits_are_fetched_in_pieces(reference):
    # 2 chunks x 127 scored rows x 262,144 floats would be 266 MB at once; in pieces of
    # 64 rows the evaluation's numpy memory stays far below that.
    assert 32 * 1024 * 1024 < reference["peak"] < 200 * 1024 * 1024, reference["peak"]


def test_same_mode_against_itself_agrees(reference):
    again = reference["again"]
    assert again.perplexity == pytest.approx(reference["result"].perplexity, rel=1e-6)
    assert 0 <= abs(again.mean_kl_divergence) < 1e-3  # only the float16 rounding of the file
    assert again.top1_agreement > 0.99


def test_int8_k_against_fp16(reference, starter_model_path, text):
    llm = _llm(starter_model_path, "q8_0", "f16")
    try:
        result = evaluate(llm, Evaluate("q8", text, CHUNK, N_CHUNKS, str(reference["path"])))
    finally:
        llm.close()
    ref = reference["result"].perplexity
    assert abs(result.perplexity - ref) / ref < 0.05
    assert 0 < result.mean_kl_divergence < 0.1
    assert 0.8 < result.top1_agreement <= 1.0


def test_bad_input(starter_model_path, text, reference, tmp_path):
    llm = _llm(starter_model_path, "f16", "f16")
    try:
        with pytest.raises(BadInputError, match="only"):
            evaluate(llm, Evaluate("short", "Hello there.", CHUNK, 1))
        with pytest.raises(BadInputError, match="does not fit"):
            evaluate(llm, Evaluate("big", text, 4096, 1))
        # A reference from another text length does not silently compare row by row.
        with pytest.raises(EngineFailedError, match="different"):
            evaluate(llm, Evaluate("mismatch", text, CHUNK, 1, str(reference["path"])))
        with pytest.raises(EngineFailedError, match="could not be read"):
            evaluate(llm, Evaluate("missing", text, CHUNK, 1, str(tmp_path / "none.npy")))
        # After a failure the context is usable again.
        assert evaluate(llm, Evaluate("ok", text, CHUNK, 1)).scored_tokens == CHUNK // 2 - 1
    finally:
        llm.close()


def test_bench_measures_prompt_and_decode_at_depth(starter_model_path):
    llm = _llm(starter_model_path, "q8_0", "f16")
    try:
        done = run_bench(llm, Bench("b", depth=256, n_prompt=128, n_gen=8))
        assert done.depth == 256 and done.n_prompt == 128 and done.n_gen == 8
        assert done.prompt_tokens_per_second > 0 and done.decode_tokens_per_second > 0
        assert done.prompt_seconds > 0 and done.decode_seconds > 0 and done.fill_seconds > 0
        with pytest.raises(BadInputError, match="does not fit"):
            run_bench(llm, Bench("far", depth=1000, n_prompt=128, n_gen=8))
        # The bench leaves the cache empty: a completion afterwards still works.
        assert llm.create_completion("The sky is", max_tokens=4, temperature=0)["choices"][0]["text"] is not None
    finally:
        llm.close()
