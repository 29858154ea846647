"""Loading across llama.cpp RPC workers from the app, as a user does it: the load dialog's
Workers section (workers started with its own button: real `kvstudio worker` processes on
127.0.0.1), the fit on every device, Load, a streamed reply, the dashboard's row per device; a
worker whose build lacks the K/V pair refused in one sentence; what a network address exposes."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.backends.store import BackendStore
from app.engine.backend_probe import probe
from app.kv.kv_types import FP16_KV_MODE
from app.load.load_choices import remembered_choice
from app.ui.dashboard.page import DashboardPage
from tests.backends.rpc_worker_fixtures import Worker, f16_only_data, free_port
from tests.ui.conftest import LOAD_TIMEOUT_MS, REPLY_TIMEOUT_MS
from tests.waits import HANG_GUARD_MS

# Over a second per test on 2 cores: in the full suite, not the fast tier (docs/testing.md).
pytestmark = pytest.mark.slow

CHECK_TIMEOUT_MS = 120_000  # a child process reads the workers' devices: seconds on 2 cores


@pytest.fixture
def rpc_app(qtbot, chat_data_dir: Path, cpu_package: Path):
    """The app on a data folder whose chosen backend is the CPU package (it has RPC)."""
    store = BackendStore(chat_data_dir)
    store.add(cpu_package, probe)
    store.use("cpu", probe)
    from app.gui import build_app

    parts = build_app(chat_data_dir)
    parts.window.resize(1200, 800)
    parts.window.show()
    yield parts
    parts.window.close()
    parts.close()


def _open_dialog(qtbot, app):
    page = app.window.chat
    page.open_load_dialog("starter")
    dialog = page.load_dialog
    assert dialog is not None
    if dialog.facts is None:
        with qtbot.waitSignal(dialog.model_read, timeout=LOAD_TIMEOUT_MS):
            pass
    dialog.workers_box.section.toggle.click()  # the user opens Workers (closed unless used)
    return dialog


def _start_local_worker(qtbot, app, dialog) -> str:
    with qtbot.waitSignal(app.window.chat.local_workers.started, timeout=HANG_GUARD_MS) as started:
        dialog.workers_box.start_button.click()
    return started.args[0]


def _devices_checked(count: int):
    return lambda result: result.check is not None and len(result.check.fit.shares) == count


@pytest.mark.slow
def test_two_local_workers_split_the_model_and_each_device_is_charted(qtbot, rpc_app):
    app = rpc_app
    page = app.window.chat
    dialog = _open_dialog(qtbot, app)
    box = dialog.workers_box
    a = _start_local_worker(qtbot, app, dialog)
    with qtbot.waitSignal(
        box.checked, timeout=CHECK_TIMEOUT_MS, check_params_cb=_devices_checked(3)
    ):
        b = _start_local_worker(qtbot, app, dialog)
    assert box.workers == (a, b) and a.startswith("127.0.0.1:")
    assert not box.exposure.isVisible()  # both on this machine: nothing exposed
    table = box.table
    labels = [table.item(r, 0).text() for r in range(table.rowCount())]
    assert labels == ["this machine's CPU", f"RPC0 ({a})", f"RPC1 ({b})"]
    assert box.sentence.text().startswith("Fits at 2,048 tokens (q8_0/f16) on every device;")
    assert dialog.load_button.isEnabled()
    # By free memory, two CPU workers on one machine share the layers about evenly; the user
    # sets the split: a quarter of the layers on the first worker.
    with qtbot.waitSignal(box.checked, timeout=CHECK_TIMEOUT_MS):
        box.split.setText("1,3")
        box.split.editingFinished.emit()
    assert [table.item(r, 0).toolTip() for r in (1, 2)] == [
        "5 layers",
        "13 layers and the output layer",
    ]
    predicted = {label: table.item(r, 2).toolTip() for r, label in enumerate(labels)}

    with qtbot.waitSignal(app.engine.model_loaded, timeout=LOAD_TIMEOUT_MS) as loaded_signal:
        dialog.load_button.click()
    loaded = loaded_signal.args[0]
    assert loaded.options.rpc_workers == (a, b) and loaded.options.layer_split == (1.0, 3.0)
    remembered = remembered_choice(app.settings.folder, loaded.model_path)
    assert remembered.rpc_workers == (a, b) and remembered.layer_split == (1.0, 3.0)
    # The table's KV cache per worker, per cache, is what llama.cpp allocated on it (no
    # buffer at all where it holds none of that cache's layers: the first worker has no
    # global-attention layer at 1,3).
    for address, label in ((a, f"RPC0 ({a})"), (b, f"RPC1 ({b})")):
        allocated = []
        for cache in loaded.kv_caches:
            on_it = dict(zip(cache.devices, cache.device_mib, strict=True))
            allocated.append(f"{on_it.get(f'RPC0[{address}]', 0.0):.2f} MiB")
        assert predicted[label] == "per cache, as llama.cpp allocates it: " + ", ".join(allocated)

    # A reply streams through the split model.
    if page.completion_mode:  # the starter is a base model
        page.completion.chat_anyway_button.click()
    page.session.new_conversation()
    page.session.set_conversation_settings("", {"max_tokens": 8, "temperature": 0.0})
    tokens = []
    app.engine.token_received.connect(tokens.append)
    with qtbot.waitSignal(app.engine.reply_finished, timeout=REPLY_TIMEOUT_MS) as finished:
        qtbot.keyClicks(page.input, "The capital of France is")
        qtbot.keyClick(page.input, Qt.Key.Key_Return)
    assert finished.args[0].stop_reason != "error" and tokens
    assert page.session.model.messages()[-1].content.strip()

    # The dashboard: one row per device, its memory as llama.cpp read it, KV vs f16/f16.
    panel = app.window.findChild(DashboardPage).devices_panel
    assert not panel.isHidden()
    rows = panel.rows
    assert [row.label for row in rows] == [
        "CPU (this machine)",
        f"RPC0 ({a})",
        f"RPC1 ({b})",
    ]
    assert panel.table.rowCount() == 3
    assert all(row.total_bytes > 0 for row in rows), rows
    for row, (address, _label) in zip(rows[1:], ((a, ""), (b, "")), strict=True):
        mine = [
            mib
            for cache in loaded.kv_caches
            for buffer, mib in zip(cache.devices, cache.device_mib, strict=True)
            if buffer.endswith(f"[{address}]")
        ]
        assert row.kv_mib == round(sum(mine), 2) > 0
        # K=q8_0: 0.53x f16's K bytes, so less than f16/f16 on every device holding layers
        assert row.kv_f16_mib is not None and row.kv_f16_mib > row.kv_mib
    bar = panel.table.cellWidget(1, 1)  # a CPU worker: llama.cpp reports its RAM as all free
    assert bar.format().endswith("RAM (llama.cpp reports no use for a CPU device)")


@pytest.mark.slow
def test_a_worker_without_the_pair_is_refused_in_the_dialog(qtbot, rpc_app, cpu_package, tmp_path):
    app = rpc_app
    worker = Worker(f16_only_data(cpu_package, tmp_path / "f16-only"))
    try:
        dialog = _open_dialog(qtbot, app)
        box = dialog.workers_box
        assert (dialog.type_k.currentText(), dialog.type_v.currentText()) == ("q8_0", "f16")
        with qtbot.waitSignal(box.checked, timeout=CHECK_TIMEOUT_MS) as checked:
            box.address.setText(worker.address)
            box.add_button.click()
        refusal = checked.args[0].refusal
        assert refusal == (
            f"The worker at {worker.address} (cpu backend) cannot run K=q8_0/V=f16: its Flash "
            "Attention is built for f16-f16 only; choose one of those K/V modes or a worker "
            "whose backend has q8_0-f16."
        )
        assert box.sentence.isVisible() and box.sentence.text() == refusal
        assert not dialog.load_button.isEnabled()
        dialog.load_button.click()  # disabled: nothing loads
        assert app.engine.loaded is None and not app.window.chat._resolving
        with qtbot.waitSignal(
            box.checked, timeout=CHECK_TIMEOUT_MS, check_params_cb=_devices_checked(2)
        ):
            dialog._choose_pair(FP16_KV_MODE)
        assert box.result.refusal is None and dialog.load_button.isEnabled()
    finally:
        worker.stop()


def test_a_network_worker_says_what_it_exposes_and_a_bad_address_gets_one_sentence(qtbot, chat_app):
    dialog = _open_dialog(qtbot, chat_app)
    box = dialog.workers_box
    assert not box.add_worker("192.168.1.20")
    assert box.error.isVisible()
    assert box.error.text() == "The worker address '192.168.1.20' is not HOST:PORT."
    assert box.workers == ()
    idle = f"127.0.0.1:{free_port()}"
    with qtbot.waitSignal(box.checked, timeout=CHECK_TIMEOUT_MS) as checked:
        assert box.add_worker(idle)
    assert not box.exposure.isVisible() and not box.error.isVisible()
    # The built-in backend loads across workers too; nothing listens there: one sentence.
    assert checked.args[0].refusal.startswith(f"The worker at {idle} does not answer")
    assert not dialog.load_button.isEnabled()
    with qtbot.waitSignal(box.checked, timeout=CHECK_TIMEOUT_MS):
        assert box.add_worker("192.168.1.20:50052")
    assert box.exposure.isVisible()
    text = box.exposure.text()
    assert text.startswith("The worker at 192.168.1.20:50052 is reached over the network:")
    assert "no authentication" in text and "SSH tunnel" in text
    assert "ssh -N -L 50052:127.0.0.1:50052 -L 50053:127.0.0.1:50053" in text
    with qtbot.waitSignal(box.checked, timeout=CHECK_TIMEOUT_MS):
        box.list.setCurrentRow(1)
        box.remove_button.click()
    assert box.workers == (idle,) and not box.exposure.isVisible()
    dialog.reject()


def test_a_bad_layer_split_gets_one_sentence_and_no_load(qtbot, chat_app):
    dialog = _open_dialog(qtbot, chat_app)
    box = dialog.workers_box
    assert not box.split.isVisibleTo(dialog)  # a load on this machine has nothing to split
    idle = f"127.0.0.1:{free_port()}"
    with qtbot.waitSignal(box.checked, timeout=CHECK_TIMEOUT_MS):
        assert box.add_worker(idle)
    assert box.split.isVisibleTo(dialog)
    assert box.split.placeholderText().startswith("by free memory")
    with qtbot.waitSignal(box.checked, timeout=CHECK_TIMEOUT_MS):
        box.split.setText("1,x")
        box.split.editingFinished.emit()
    assert box.error.isVisible()
    assert box.error.text() == (
        "The layer split needs a share per device, like 1,3 (numbers not below 0, not all 0), "
        "not '1,x'."
    )
    assert box.layer_split == () and not dialog.load_button.isEnabled()
    assert dialog.chosen().layer_split == ()
    with qtbot.waitSignal(box.checked, timeout=CHECK_TIMEOUT_MS):
        box.split.setText("2")
        box.split.editingFinished.emit()
    assert not box.error.isVisible() and dialog.chosen().layer_split == (2.0,)
    box.remove_button.click()  # no workers left: nothing to split, nothing sent
    assert dialog.chosen().layer_split == () and not box.split.isVisibleTo(dialog)
    dialog.reject()
