"""The Backends page and the load dialog, offscreen: add the real CPU package, switch the running
engine to it (the loaded model comes back on it and answers), refuse a tampered package with one
sentence while the engine keeps its backend; and the load dialog says when the running GPU
backend has no kernel for the chosen K/V pair and offers pairs it has."""

from __future__ import annotations

import pytest

from app.backends.store import BUILT_IN
from app.engine.build_info import BackendPairs, parse_system_info
from app.kv.kv_types import KvMode
from tests.backends.package_edits import copy_package, flip_a_byte, mapped_libllama, repack
from tests.docs_output import save_screenshot
from tests.ui.conftest import LOAD_TIMEOUT_MS, REPLY_TIMEOUT_MS
from tests.waits import HANG_GUARD_MS

pytestmark = pytest.mark.slow

TASK_MS = 120_000
# llama.cpp's system-info line of a CUDA build made without GGML_CUDA_FA_QUANTS: its default
# pair list, which lacks K=q8_0/V=f16 (the format the H200 reference run printed).
DEFAULT_PAIRS_CUDA_LINE = (
    "CUDA : ARCHS = 900 | USE_GRAPHS = 1 | PEER_MAX_BATCH_SIZE = 128 | "
    "FA_QUANTS = q4_0-q4_0,q8_0-q8_0,f16-f16,bf16-bf16 | CPU : SSE3 = 1 | AVX2 = 1 |"
)


def backends_page(app):
    app.window.show_page("Backends")
    return app.window.pages.currentWidget()


def test_switching_the_running_engine_to_a_package_and_refusing_a_tampered_one(
    qtbot, loaded_chat_app, cpu_package, tmp_path, docs_folder
):
    app = loaded_chat_app
    page = backends_page(app)
    assert page.in_use.text() == "The engine runs the built-in backend."
    assert "site-packages/llama_cpp/lib" in str(mapped_libllama(app.engine.engine_pid))

    with qtbot.waitSignal(page.task_finished, timeout=TASK_MS) as added:
        page.add(cpu_package)
    assert added.args == ["Added the cpu backend. Select it and press Use to run the engine on it."]
    names = [page.table.item(row, 1).text() for row in range(page.table.rowCount())]
    assert names == [BUILT_IN, "cpu"]
    assert page.table.horizontalHeaderItem(4).text() == "FA kernel"
    assert page.table.item(1, 4).text() == "-"  # a CPU package has no GPU kernels to name

    page.table.selectRow(1)
    assert "GPU targets: none (CPU)" in page.details.toPlainText()
    assert "Flash Attention GPU kernels: none (no CUDA/HIP kernels in this build)" in (
        page.details.toPlainText()
    )
    with (
        qtbot.waitSignal(app.engine.model_loaded, timeout=LOAD_TIMEOUT_MS),
        qtbot.waitSignal(page.backend_switched, timeout=TASK_MS),
    ):
        page.use_button.click()
    assert page.in_use.text() == "The engine runs the cpu backend."
    assert page.table.item(1, 0).text() == "● in use"
    package_lib = app.settings.folder / "backends" / "cpu" / "libllama.so"
    assert mapped_libllama(app.engine.engine_pid) == package_lib.resolve()
    assert app.engine.engine_backend == "cpu"

    chat = app.window.chat
    chat.session.new_conversation()  # a short reply: the starter continues text up to max_tokens
    chat.session.set_conversation_settings("", {"max_tokens": 8, "temperature": 0.0})
    chat.input.setPlainText("Say hello.")
    with qtbot.waitSignal(app.engine.reply_finished, timeout=REPLY_TIMEOUT_MS) as finished:
        chat.send_button.click()
    assert 0 < finished.args[0].generated_tokens <= 8

    with qtbot.waitSignal(page.task_finished, timeout=TASK_MS) as verified:
        page.verify_button.click()
    assert verified.args == ["The cpu backend verified."]
    assert "no GPU int8-K kernel is involved" in page.details.toPlainText()
    save_screenshot(app.window, docs_folder, "backends.png")

    folder = copy_package(cpu_package, tmp_path)
    flip_a_byte(folder / "libllama.so")
    tampered = repack(folder, tmp_path / "kvstudio-backend-cpu-tampered.tar.gz")
    with qtbot.waitSignal(page.task_finished, timeout=TASK_MS) as refused:
        page.add(tampered)
    assert refused.args == [
        "The cpu backend's files do not match its manifest: libllama.so does not match its sha256."
    ]
    assert page.message.text() == refused.args[0]
    assert page.in_use.text() == "The engine runs the cpu backend."
    assert mapped_libllama(app.engine.engine_pid) == package_lib.resolve()

    with qtbot.waitSignal(app.engine.model_loaded, timeout=LOAD_TIMEOUT_MS):
        page.use(BUILT_IN)
    assert "site-packages/llama_cpp/lib" in str(mapped_libllama(app.engine.engine_pid))


def test_load_dialog_offers_compiled_pairs_when_the_gpu_backend_lacks_int8_k(
    qtbot, tmp_path, docs_folder
):
    from app.state.settings import Settings
    from app.ui.chat.load_dialog import LoadDialog

    pairs = BackendPairs("cuda", parse_system_info(DEFAULT_PAIRS_CUDA_LINE).fa_pairs)
    dialog = LoadDialog("starter", Settings(type_k="q8_0", type_v="f16"), tmp_path, pairs)
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.model_read, timeout=HANG_GUARD_MS):
        dialog.show()
    assert dialog.pair_warning.isVisible()
    assert dialog.pair_warning.text() == (
        "The cuda backend has no Flash Attention kernel for K=q8_0 / V=f16: llama.cpp would "
        "convert the cache to f16 at every step, which is slow and gives back the memory int8-K "
        "saves. Use q8_0/q8_0 or f16/f16 instead."
    )
    save_screenshot(dialog, docs_folder, "load-dialog-missing-pair.png")
    dialog.pair_buttons[KvMode.parse("q8_0/q8_0")].click()
    assert dialog.chosen().kv == KvMode.parse("q8_0/q8_0")
    assert not dialog.pair_warning.isVisible()
    assert not any(b.isVisible() for b in dialog.pair_buttons.values())


def test_load_dialog_says_nothing_on_a_backend_that_runs_every_pair(qtbot, tmp_path):
    from app.state.settings import Settings
    from app.ui.chat.load_dialog import LoadDialog

    cpu_line = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 |"
    pairs = BackendPairs(BUILT_IN, parse_system_info(cpu_line).fa_pairs)
    dialog = LoadDialog("starter", Settings(type_k="q8_0", type_v="f16"), tmp_path, pairs)
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.model_read, timeout=HANG_GUARD_MS):
        dialog.show()
    assert not dialog.pair_warning.isVisible()
    assert not any(b.isVisible() for b in dialog.pair_buttons.values())


def test_chat_page_reads_the_pairs_of_the_running_build(loaded_chat_app):
    pairs = loaded_chat_app.window.chat.backend_pairs()
    assert pairs == BackendPairs(BUILT_IN, None)  # a CPU build reports no FA_QUANTS list
