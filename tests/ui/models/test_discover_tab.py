"""The Discover tab: search the Hub, open a repo, fit verdicts per file and KV mode."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.docs_output import save_screenshot
from tests.gguf_factory import write_tiny_gguf
from tests.ui.models.page_driver import (
    GATED,
    GIB,
    OTHER,
    Q8,
    REPO,
    SPLIT,
    WAIT,
    Budget,
    make_page,
    open_repo,
    shut,
    start_download,
    wait_fits,
)

# ---- search ---------------------------------------------------------------------------------


def test_search_shows_results_with_author_downloads_likes_and_date(qtbot, env):
    page = make_page(qtbot, env)
    page.search("tiny")
    qtbot.waitUntil(lambda: page.search_view.results.rowCount() == 3, timeout=WAIT)
    model = page.search_view.results
    rows = [[model.index(r, c).data() for c in range(model.columnCount())] for r in range(3)]
    assert rows[0] == ["tiny-llama-GGUF", "acme", "5k", "7", "2025-03-01"]
    assert "3 models found." == page.search_view.status_label.text()

    # Sorting by likes puts the most liked first (the server sorts, as the Hub does).
    page.search_view.sort_combo.setCurrentIndex(1)
    qtbot.waitUntil(
        lambda: model.rowCount() == 3 and model.row_at(0).repo_id == OTHER, timeout=WAIT
    )
    page.search_view.sort_combo.setCurrentIndex(0)
    qtbot.waitUntil(lambda: model.rowCount() == 3 and model.row_at(0).repo_id == REPO, timeout=WAIT)
    page.search_view.sort_combo.setCurrentIndex(2)  # recently updated: zeta's (June) first
    qtbot.waitUntil(
        lambda: model.rowCount() == 3 and model.row_at(0).repo_id == OTHER, timeout=WAIT
    )
    shut(page)


def test_the_hub_is_asked_nothing_until_the_user_searches(qtbot, env):
    page = make_page(qtbot, env)  # shown, on the Discover tab
    model = page.search_view.results
    # A search would have said "Searching…" at once; tests/ui/test_no_network.py sees the socket.
    # The recommended list in view instead is the project's own data.
    view = page.search_view
    assert model.rowCount() == 0 and view.status_label.text() == view.recommended_hint()
    page.search_view.search_button.click()  # an empty box: the most downloaded models
    qtbot.waitUntil(lambda: model.rowCount() == 3, timeout=WAIT)
    assert [model.row_at(r).repo_id for r in range(3)] == [REPO, OTHER, GATED]
    shut(page)


def test_search_offline_says_so_in_one_sentence(qtbot, env, monkeypatch):
    page = make_page(qtbot, env)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    page.search("tiny")
    qtbot.waitUntil(
        lambda: "Offline mode is on" in page.search_view.status_label.text(), timeout=WAIT
    )
    assert page.search_view.results.rowCount() == 0
    shut(page)


# ---- a repo and its fit ---------------------------------------------------------------------


def _tree_rows(page) -> dict[str, list[list[str]]]:
    """Quantization group -> ['file name | size | verdicts...', ...] (not the speed)."""
    from app.ui.models.repo_files_model import SPEED_COLUMN

    m = page.repo_view.model
    groups: dict[str, list[list[str]]] = {}
    for g in range(m.rowCount()):
        group = m.item(g, 0)
        groups[group.text().split("  · ")[0]] = [  # without "Recommended here"
            [group.child(r, c).text() for c in range(SPEED_COLUMN)] for r in range(group.rowCount())
        ]
    return groups


def test_open_repo_groups_files_by_quantization_with_sizes_and_fit(qtbot, env, gguf_files, hub):
    page = make_page(qtbot, env)
    open_repo(qtbot, page)
    wait_fits(qtbot, page)
    groups = _tree_rows(page)
    assert set(groups) == {"Q8_0", "F16", "Q4_K_M"}  # README.md is not a model
    from app.platform import units as fmt

    assert groups["Q8_0"][0][:2] == ["tiny-llama-Q8_0", fmt.size(gguf_files["q8"].stat().st_size)]
    split_total = gguf_files["split1"].stat().st_size + len(b"second part of a split model " * 1000)
    assert groups["Q4_K_M"][0][:2] == ["tiny-llama-Q4_K_M  (2 parts)", fmt.size(split_total)]
    # A tiny model fits 8 GiB in every KV mode; the cell says so and the largest context.
    for row in groups["Q8_0"] + groups["F16"]:
        assert all(cell.startswith("fits · ") for cell in row[2:]), row  # and the largest
    fit = page.repo_view.fit_for(Q8)
    f16, q8k, q8kv = (m.kv_bytes for m in fit.modes)
    assert q8kv < q8k < f16 and q8k * 128 == f16 * (64 + 34)  # K at 34/64 of f16, V unchanged

    # The header came from range requests, never the whole file, and one header served every
    # quantization of the model (the smallest file's: split part 1).
    gets = [r for r in hub.log if r.method == "GET" and "/cdn/" in r.path]
    assert gets and all(r.sent <= 4 * 1024 * 1024 for r in gets)
    assert {r.path.split("?")[0] for r in gets} == {
        f"/cdn/{hub.repos[REPO].files[SPLIT[0]].sha256}"
    }

    # The detail table shows every KV mode with a verdict.
    page.repo_view.select_entry(Q8)
    detail = page.repo_view.detail
    assert [detail.item(r, 0).text() for r in range(3)] == ["f16/f16", "q8_0/f16", "q8_0/q8_0"]
    assert all(detail.item(r, 3).text() == "fits" for r in range(3))
    shut(page)


def test_unknown_repo_says_so_in_one_sentence(qtbot, env):
    page = make_page(qtbot, env)
    page.repo_view.open_repo("acme/no-such-GGUF")
    qtbot.waitUntil(lambda: "acme/no-such-GGUF" in page.repo_view.status_label.text(), timeout=WAIT)
    assert page.repo_view.status_label.text().startswith("No model repository 'acme/no-such-GGUF'")
    assert page.repo_view.entry_names() == []
    shut(page)


def test_split_model_downloads_as_one_entry(qtbot, env, gguf_files):
    page = make_page(qtbot, env)
    open_repo(qtbot, page)
    start_download(qtbot, page, SPLIT[0])
    with qtbot.waitSignal(page.downloads.download_finished, timeout=WAIT) as finished:
        pass
    first = finished.args[1].path
    assert first.name == SPLIT[0] and (first.parent / SPLIT[1]).exists()
    lib = page.library_view
    qtbot.waitUntil(lambda: lib.select_path(str(first)), timeout=WAIT)
    model = lib.selected_model()
    assert model.n_parts == 2
    assert model.file_size == first.stat().st_size + (first.parent / SPLIT[1]).stat().st_size
    shut(page)


def test_kv_type_the_model_cannot_use_is_marked_not_supported(qtbot, env, hub, tmp_path):
    # q8_0 packs 32 values per block: llama.cpp refuses it for a head size of 48.
    odd = write_tiny_gguf(tmp_path / "odd.gguf", n_head=4, n_head_kv=2, head_dim=48, seed=9)
    hub.add_repo("acme/odd-head-GGUF", {"odd-head-F16.gguf": odd})
    page = make_page(qtbot, env)
    open_repo(qtbot, page, "acme/odd-head-GGUF")
    wait_fits(qtbot, page)
    row = _tree_rows(page)["F16"][0]
    assert row[2].startswith("fits") and row[3:] == ["not supported", "not supported"]
    fit = page.repo_view.fit_for("odd-head-F16.gguf")
    assert "divisible by 32" in fit.modes[1].reason
    shut(page)


def test_small_budget_says_does_not_fit(qtbot, env):
    page = make_page(qtbot, env, budget=1024 * 1024)
    open_repo(qtbot, page)
    wait_fits(qtbot, page)
    for row in _tree_rows(page)["Q8_0"]:
        assert row[2:] == ["does not fit"] * 3
    # Changing the context re-estimates every file.
    page.fit_estimator.budget_fn = Budget(8 * GIB)
    page.fit_estimator.refresh_budget()
    page.repo_view.context_spin.setValue(4096)
    qtbot.waitUntil(lambda: _tree_rows(page)["Q8_0"][0][2].startswith("fits"), timeout=WAIT)
    assert page.repo_view.fit_for(Q8).n_ctx == 4096
    shut(page)


@pytest.mark.slow
def test_starter_model_from_the_hub(qtbot, env, hub, starter_model_path):
    hub.add_repo(
        "kvstudio/gemma-3-270m-GGUF", {"gemma-3-270m-Q4_K_M.gguf": starter_model_path}, downloads=10
    )
    page = make_page(qtbot, env, budget=2 * GIB)
    open_repo(qtbot, page, "kvstudio/gemma-3-270m-GGUF")
    wait_fits(qtbot, page)
    fit = page.repo_view.fit_for("gemma-3-270m-Q4_K_M.gguf")
    assert fit.n_ctx_train == 32768
    assert [m.verdict for m in fit.modes] == ["fits"] * 3
    # Only the header was read: a few MiB of a 253 MB file.
    assert hub.bytes_sent() < 16 * 1024 * 1024
    start_download(qtbot, page, "gemma-3-270m-Q4_K_M.gguf")
    with qtbot.waitSignal(page.downloads.download_finished, timeout=120_000) as finished:
        pass
    assert os.path.getsize(finished.args[1].path) == starter_model_path.stat().st_size
    shut(page)


def write_shaped_gguf(
    path,
    ftype,
    n_layer=32,
    n_embd=4096,
    n_head=32,
    n_head_kv=8,
    n_ff=14336,
    n_vocab=128256,
    n_ctx_train=131072,
    split_max_size=0,
):
    """A GGUF with Llama-3.1-8B shapes and zero weights: a real header, sparse data.

    Only for showing the fit estimate on realistic sizes; nothing can be learned from its
    weights. Returns the paths written (one, or the parts of a split model)."""
    import gguf
    import numpy as np
    from gguf.constants import GGML_QUANT_SIZES
    from gguf.constants import GGMLQuantizationType as T

    big = {"Q2_K": T.Q2_K, "Q4_K_M": T.Q4_K, "Q8_0": T.Q8_0, "F16": T.F16}[ftype]
    file_type = {
        "Q2_K": gguf.LlamaFileType.MOSTLY_Q2_K,
        "Q4_K_M": gguf.LlamaFileType.MOSTLY_Q4_K_M,
        "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
        "F16": gguf.LlamaFileType.MOSTLY_F16,
    }[ftype]
    w = gguf.GGUFWriter(path, "llama", split_max_size=split_max_size)
    w.add_name("Llama-3.1-8B shapes (zero weights)")
    w.add_file_type(file_type)
    w.add_context_length(n_ctx_train)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(n_vocab)])
    hd = n_embd // n_head

    def tensor(name, shape, qtype):  # shape in numpy order (rows, row length)
        values, nbytes = GGML_QUANT_SIZES[qtype]
        rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
        w.add_tensor_info(
            name, shape, np.float32, rows * shape[-1] // values * nbytes, raw_dtype=qtype
        )

    tensor("token_embd.weight", (n_vocab, n_embd), big)
    for i in range(n_layer):
        tensor(f"blk.{i}.attn_norm.weight", (n_embd,), T.F32)
        tensor(f"blk.{i}.attn_q.weight", (n_embd, n_embd), big)
        tensor(f"blk.{i}.attn_k.weight", (n_head_kv * hd, n_embd), big)
        tensor(f"blk.{i}.attn_v.weight", (n_head_kv * hd, n_embd), big)
        tensor(f"blk.{i}.attn_output.weight", (n_embd, n_embd), big)
        tensor(f"blk.{i}.ffn_norm.weight", (n_embd,), T.F32)
        tensor(f"blk.{i}.ffn_gate.weight", (n_ff, n_embd), big)
        tensor(f"blk.{i}.ffn_up.weight", (n_ff, n_embd), big)
        tensor(f"blk.{i}.ffn_down.weight", (n_embd, n_ff), big)
    tensor("output_norm.weight", (n_embd,), T.F32)
    tensor("output.weight", (n_vocab, n_embd), T.Q6_K if ftype in ("Q2_K", "Q4_K_M") else big)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    paths = []
    for fout, tensors in zip(w.fout, w.tensors, strict=True):
        fout.flush()
        header_end = fout.tell()
        data = sum(w.ggml_pad(ti.nbytes, w.data_alignment) for ti in tensors.values())
        fout.truncate(w.ggml_pad(header_end, w.data_alignment) + data)  # sparse: no disk used
        paths.append(fout.name)
    w.close()
    return [Path(p) for p in paths]


DEMO = "demo/Llama-3.1-8B-shapes-GGUF"


@pytest.mark.slow
def test_render_models_page(qtbot, env, hub, starter_model_path, tmp_path, docs_folder):
    """Renders the Discover tab to a PNG: search results and, for a repo of zero-weight GGUFs
    with Llama-3.1-8B shapes (real headers, sparse files), the fit verdicts at 128k context
    against this machine's free memory. scripts/refresh_docs.py refreshes
    docs/screenshots/models.png."""
    hub.add_repo(
        "kvstudio/gemma-3-270m-GGUF",
        {"gemma-3-270m-Q4_K_M.gguf": starter_model_path},
        downloads=48211,
        likes=312,
        last_modified=datetime(2025, 8, 14, tzinfo=UTC),
    )
    files: dict[str, Path] = {}
    for ftype, split in (("Q4_K_M", 0), ("Q8_0", 0), ("F16", 8 * 10**9)):
        for part in write_shaped_gguf(
            tmp_path / f"Llama-3.1-8B-shapes-{ftype}.gguf", ftype, split_max_size=split
        ):
            files[part.name] = part
    # Hashing 28 GB of zeros would take a while; these files are never downloaded here.
    fake_sha = {name: f"{i + 1:064x}" for i, name in enumerate(files)}
    hub.add_repo(
        DEMO,
        files,
        sha256=fake_sha,
        downloads=131072,
        likes=640,
        last_modified=datetime(2025, 9, 2, tzinfo=UTC),
    )
    from PySide6.QtWidgets import QApplication

    from app.platform.probes import read_free_memory

    style = Path(__file__).resolve().parents[3] / "assets" / "style.qss"
    app = QApplication.instance()
    old_style = app.styleSheet()
    if style.exists():  # as the app shows it
        app.setStyleSheet(style.read_text(encoding="utf-8"))
    page = make_page(qtbot, env)
    page.fit_estimator.budget_fn = read_free_memory  # this machine's real free memory
    page.resize(1440, 600)
    page.repo_view.context_spin.setValue(131072)
    page.search_view.query_edit.setText("GGUF")
    page.search_view.search()
    qtbot.waitUntil(lambda: page.search_view.results.rowCount() == 5, timeout=WAIT)
    page.search_view.table.selectRow(0)
    qtbot.waitUntil(lambda: len(page.repo_view.entry_names()) == 3, timeout=WAIT)
    wait_fits(qtbot, page)
    fit = page.repo_view.fit_for("Llama-3.1-8B-shapes-Q4_K_M.gguf")
    assert fit.n_ctx == 131072 and fit.n_ctx_train == 131072
    kv = [m.kv_bytes for m in fit.modes]
    assert kv[0] == 16 * GIB  # 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes x 131072
    assert kv[1] == 16 * GIB * (64 + 34) // 128 and kv[2] == 16 * GIB * 34 // 64
    page.repo_view.select_entry("Llama-3.1-8B-shapes-Q4_K_M.gguf")
    assert save_screenshot(page, docs_folder, "models.png").stat().st_size > 10_000
    save_screenshot(page, docs_folder, "models.png")
    app.setStyleSheet(old_style)
    shut(page)
