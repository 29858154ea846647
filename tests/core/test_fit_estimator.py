"""Fit verdicts of Hub files before a download (app/kv/fit_estimator.py), against the fake Hub."""

from __future__ import annotations

from app.kv.fit import FITS, NO_FIT, UNSUPPORTED
from app.kv.fit_estimator import FitEstimator, model_family
from app.models.hub import list_gguf_files
from app.platform.probes import FreeMemory

GIB = 2**30


def _budget(n: int):
    return lambda: FreeMemory(n, "system RAM", "test", False)


def test_fit_of_a_hub_file_without_downloading_it(hub_env, tiny_gguf) -> None:
    source = tiny_gguf("t.gguf", n_layer=4, n_ctx_train=8192)
    hub_env.add_repo("acme/tiny-GGUF", {"tiny-F16.gguf": source})
    (entry,) = list_gguf_files("acme/tiny-GGUF").entries
    roomy = FitEstimator(budget_fn=_budget(8 * GIB))(entry, 4096)
    assert [f.verdict for f in roomy.modes] == [FITS] * 3 and roomy.n_ctx_train == 8192
    kv = [f.kv_bytes for f in roomy.modes]  # fp16, K=q8_0/V=f16, K=V=q8_0
    assert kv[0] > kv[1] > kv[2] > 0
    assert all(f.largest_n_ctx >= 4096 for f in roomy.modes)
    tight = FitEstimator(budget_fn=_budget(source.stat().st_size // 2))(entry, 4096)
    assert all(f.verdict == NO_FIT and f.largest_n_ctx == 0 for f in tight.modes)
    hub_env.wait_idle()
    reads = [r for r in hub_env.log if "/cdn/" in r.path]
    assert len(reads) == 1 and reads[0].range.startswith("bytes=0-")  # one range read, then cached


def test_one_header_serves_every_quantization_of_a_model(hub_env, tiny_gguf) -> None:
    hub_env.add_repo(
        "acme/tiny-GGUF",
        {
            "tiny-Q8_0.gguf": tiny_gguf("a.gguf", n_layer=4, seed=1),
            "tiny-F16.gguf": tiny_gguf("b.gguf", n_layer=6, seed=2),
        },
    )
    entries = list_gguf_files("acme/tiny-GGUF").entries
    assert len({model_family(e) for e in entries}) == 1
    asked = []
    estimator = FitEstimator(budget_fn=_budget(8 * GIB))
    reader = estimator.header_fn
    estimator.header_fn = lambda entry: asked.append(entry.name) or reader(entry)
    estimator.set_entries(entries)
    fits = [estimator(e, 2048) for e in entries]
    smallest = min(entries, key=lambda e: e.total_size)
    assert asked == [smallest.name]
    assert fits[0].weights_bytes != fits[1].weights_bytes  # each file's own size


def test_a_kv_type_llama_cpp_refuses_is_marked_not_supported(hub_env, tiny_gguf) -> None:
    # q8_0 packs 32 values per block: llama.cpp refuses it for a head size of 48.
    odd = tiny_gguf("odd.gguf", n_head=4, n_head_kv=2, head_dim=48, seed=9)
    hub_env.add_repo("acme/odd-GGUF", {"odd-F16.gguf": odd})
    (entry,) = list_gguf_files("acme/odd-GGUF").entries
    fit = FitEstimator(budget_fn=_budget(8 * GIB))(entry, 2048)
    assert [m.verdict for m in fit.modes] == [FITS, UNSUPPORTED, UNSUPPORTED]
    assert "divisible by 32" in fit.modes[1].reason and fit.modes[1].kv_bytes == 0
