"""Quality (perplexity, KL divergence, top-1) and the depth bench, in-process on the real
starter model: the same functions the engine worker dispatches Evaluate and Bench to."""

from __future__ import annotations

import math
import tracemalloc

import llama_cpp  # before numpy (docs/llama-cpp-notes.md: import order is load-bearing)
import numpy as np
import pytest

from app.engine.bench import run_bench
from app.engine.loader import weights_repacked
from app.engine.messages import Bench, Evaluate
from app.engine.quality import default_reference_text, evaluate
from app.platform.errors import BadInputError, EngineFailedError
from tests.engine_threads import ENGINE_THREADS

pytestmark = pytest.mark.slow
CHUNK = 256
N_CHUNKS = 2


def _llm(path, k: str, v: str):
    """A Llama as the engine loads one: weights not repacked (on a CPU with AMX, repacking
    would run llama.cpp's AMX kernels, which crash on this model)."""
    types = {"f16": llama_cpp.GGML_TYPE_F16, "q8_0": llama_cpp.GGML_TYPE_Q8_0}
    with weights_repacked(False):
        return llama_cpp.Llama(
            str(path),
            n_ctx=1024,
            flash_attn=True,
            type_k=types[k],
            type_v=types[v],
            n_threads=ENGINE_THREADS,
            verbose=False,
        )


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
        result = evaluate(
            llm, Evaluate("ref", text, CHUNK, N_CHUNKS, str(path), write_reference=True)
        )
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
    # The same build, text and batches give the same logits, rounded alike: nothing differs.
    assert again.mean_kl_divergence == 0.0
    assert again.top1_agreement == 1.0


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
        assert (
            llm.create_completion("The sky is", max_tokens=4, temperature=0)["choices"][0]["text"]
            is not None
        )
    finally:
        llm.close()


# ---- an independent computation on the same logits -------------------------------------------

SPOT_CHECKS = ((0, CHUNK // 2), (0, CHUNK // 2 + 61), (1, CHUNK - 2))  # (chunk, position)


def _log_softmax64(logits: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    x -= x.max()
    return x - np.log(np.exp(x).sum())


def _logits_at(llm, chunk_tokens: list[int], pos: int) -> np.ndarray:
    """llama.cpp's logits at `pos` after the chunk's tokens 0..pos, through llama-cpp-python's
    own eval from an empty cache (one decode, last position only): not the batches and
    buffers app.engine.quality uses."""
    llm.reset()
    llm.eval(chunk_tokens[: pos + 1])
    pointer = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
    return np.ctypeslib.as_array(pointer, shape=(llm.n_vocab(),)).copy()


def _row(chunk: int, pos: int) -> int:
    first = CHUNK // 2
    return chunk * (CHUNK - first - 1) + (pos - first)


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    return float((np.exp(p) * (p - q)).sum())


def _spot_check(llm, text: str, saved: np.ndarray) -> None:
    """At SPOT_CHECKS the saved rows are llama.cpp's distributions at those positions.

    Logits of one position differ with the batch shape they were computed in (up to ~0.3 in
    a log-probability on this Q4_K model, KL ~0.02), while the rows of the next or previous
    position are KL > 5 away: a row written to the wrong place, or not a log-softmax of the
    logits, cannot pass."""
    tokens = llm.tokenize(text[:20_000].encode("utf-8"), add_bos=True, special=False)
    for chunk, pos in SPOT_CHECKS:
        chunk_tokens = list(tokens[chunk * CHUNK : (chunk + 1) * CHUNK])
        chunk_tokens[0] = llm.token_bos()
        fresh = _log_softmax64(_logits_at(llm, chunk_tokens, pos))
        row = saved[_row(chunk, pos)].astype(np.float64)
        assert abs(np.exp(row).sum() - 1) < 0.01, (chunk, pos)
        assert _kl(fresh, row) < 0.1, (chunk, pos)


def test_reported_kl_and_top1_are_what_numpy_computes_from_the_logits(
    reference, starter_model_path, text, tmp_path
):
    """KL(P_f16 || P_int8K) and top-1 agreement recomputed in float64 numpy from both runs'
    saved log-probabilities (the int8-K run writes its own as a reference file too; both files
    checked at a few positions against llama.cpp's logits fetched another way): the engine's
    reported numbers must be these."""
    own_path = tmp_path / "q8.npy"
    llm = _llm(starter_model_path, "q8_0", "f16")
    try:
        evaluate(
            llm, Evaluate("q8-own", text, CHUNK, N_CHUNKS, str(own_path), write_reference=True)
        )
        reported = evaluate(llm, Evaluate("q8", text, CHUNK, N_CHUNKS, str(reference["path"])))
        own = np.load(own_path, mmap_mode="r")
        _spot_check(llm, text, own)
    finally:
        llm.close()
    ref = np.load(reference["path"], mmap_mode="r")
    llm = _llm(starter_model_path, "f16", "f16")
    try:
        _spot_check(llm, text, ref)
    finally:
        llm.close()

    rows = ref.shape[0]
    assert own.shape == ref.shape and rows == reported.scored_tokens
    kl = np.zeros(rows)
    same = np.zeros(rows, dtype=bool)
    for start in range(0, rows, 32):  # 32 rows of 262,144 at a time
        p = ref[start : start + 32].astype(np.float64)
        q = own[start : start + 32].astype(np.float64)
        kl[start : start + 32] = (np.exp(p) * (p - q)).sum(axis=1)
        same[start : start + 32] = p.argmax(axis=1) == q.argmax(axis=1)
    print(
        f"int8 K vs f16: reported KL {reported.mean_kl_divergence:.5f} "
        f"top-1 {reported.top1_agreement:.4f}; "
        f"numpy KL {kl.mean():.5f} top-1 {same.mean():.4f} ({rows - same.sum()} of {rows} differ)"
    )
    # int8 K changes some top-1 picks on this model, so a count that ignores them shows.
    assert 0 < same.sum() < rows - 3
    # Both sides compare the same float16-rounded log-probabilities (the engine rounds its
    # own as the file's were), so the top-1 picks are the same picks on any CPU. The KL sums
    # differ only by float32 against float64 arithmetic: exp() in float32 is off by about
    # 2^-24 relative, and numpy's pairwise sum of 262,144 float32 terms p * (ref - own) by
    # at most ~18 * 2^-24 of the sum of their sizes, a few times the row's KL. That is ~1e-6
    # relative; 1e-4 leaves a hundredfold margin and still tells the reverse direction,
    # KL(P_int8K || P_f16), 0.5% away, from this one.
    assert reported.top1_agreement == same.mean()
    assert reported.mean_kl_divergence == pytest.approx(kl.mean(), rel=1e-4)
