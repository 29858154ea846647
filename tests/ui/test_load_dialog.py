"""Loading a model is one dialog: its load settings, a live fit for this machine (the Models
page's numbers), Reload for the loaded model, and the choice remembered per model file."""

from __future__ import annotations

import re

import pytest

from app.engine.messages import Load
from app.kv.fit import NO_FIT, memory_need
from app.load.load_check import gpu_build
from app.models.gguf_read import read_gguf_header
from app.platform.probes import FREE_MEMORY_ENV
from app.state.settings import DEFAULT_CONTEXT
from app.ui.chat.load_dialog import NO_GPU, LoadDialog
from tests.ui.conftest import LOAD_TIMEOUT_MS
from tests.ui.layout_checks import SMALL, layout_problems, show_at
from tests.waits import HANG_GUARD_MS

N_CTX = 2048  # tests/ui/conftest.py's chat_data_dir saves this default context
STARTER_REPO = "kvstudio/gemma-3-270m-GGUF"
STARTER_FILE = "gemma-3-270m-Q4_K_M.gguf"
SMALL_CTX, LARGE_CTX = 2048, 16384


def models_page(window):
    from app.ui.models.page import ModelsPage

    pages = map(window.pages.widget, range(window.pages.count()))
    return next(w for w in pages if isinstance(w, ModelsPage))


def open_from_menu(qtbot, page, label: str) -> LoadDialog:
    """Open the picker's menu and choose `label` (a model, or Load options…); the dialog
    that opens, once it has read the model."""
    menu = page.picker.menu()
    menu.aboutToShow.emit()
    action = next(a for a in menu.actions() if a.text().startswith(label))
    action.trigger()
    dialog = page.load_dialog
    assert dialog is not None and dialog.isVisible()
    if dialog.facts is None:
        with qtbot.waitSignal(dialog.model_read, timeout=HANG_GUARD_MS):
            pass
    return dialog


def fake_app(folder):
    """The real app on `folder` with the fake engine: what matters is the Load it is sent."""
    from app.gui import build_app
    from app.services.engine_client import EngineClient
    from tests.fake_engine import FakeEngine

    engine = FakeEngine()
    parts = build_app(folder, engine=EngineClient(process_factory=lambda: engine))
    parts.window.resize(1200, 800)
    parts.window.show()
    return parts, engine


def sizes(text: str) -> list[str]:
    return re.findall(r"\d[\d,]*\.\d+ [KMG]iB", text)


@pytest.fixture
def capped_memory(monkeypatch, starter_model_path) -> int:
    """Free memory just short of what the starter needs at LARGE_CTX, the same figure for the
    Models page and the load dialog (this machine's free memory moves between two reads)."""
    header = read_gguf_header(starter_model_path)
    size = starter_model_path.stat().st_size
    need = memory_need(header, LARGE_CTX, "q8_0/f16", file_size=size, on_gpu=gpu_build())
    monkeypatch.setenv(FREE_MEMORY_ENV, str(need.total_bytes - 1))
    return need.total_bytes - 1


@pytest.mark.slow
def test_the_live_fit_is_the_models_pages_and_follows_the_context(
    qtbot, hub_env, chat_app, starter_model_path, capped_memory
) -> None:
    from tests.ui.models.page_driver import open_repo, wait_fits

    hub_env.add_repo(STARTER_REPO, {STARTER_FILE: starter_model_path}, downloads=10)
    models = models_page(chat_app.window)
    chat_app.window.show_page("Models")
    open_repo(qtbot, models, STARTER_REPO)
    wait_fits(qtbot, models)
    chat_app.window.show_page("Chat")
    page = chat_app.window.chat
    dialog = open_from_menu(qtbot, page, "Starter model")

    # One default context: the Models page estimates at the context the dialog loads with.
    assert dialog.n_ctx.value() == models.repo_view.context_spin.value() == N_CTX
    for n_ctx in (SMALL_CTX, LARGE_CTX):
        if models.repo_view.context_spin.value() != n_ctx:
            models.repo_view.context_spin.setValue(n_ctx)
            qtbot.waitUntil(
                lambda n=n_ctx: getattr(models.repo_view.fit_for(STARTER_FILE), "n_ctx", 0) == n,
                timeout=20_000,
            )
        hub_fit = models.repo_view.fit_for(STARTER_FILE).for_mode("q8_0/f16")
        if dialog.n_ctx.value() != n_ctx:
            with qtbot.waitSignal(dialog.fit_changed, timeout=HANG_GUARD_MS):
                dialog.n_ctx.setValue(n_ctx)  # the estimate follows as the user types
        shown = dialog.fit.mode_fit
        assert (shown.verdict, shown.total_bytes, shown.kv_bytes, shown.budget_bytes) == (
            hub_fit.verdict,
            hub_fit.total_bytes,
            hub_fit.kv_bytes,
            hub_fit.budget_bytes,
        )
        assert shown.largest_n_ctx == hub_fit.largest_n_ctx
    assert hub_fit.verdict == NO_FIT  # the capped memory: LARGE_CTX is one byte too many
    text = dialog.fit_label.text()
    # Before Load is pressed, the refusal a load would meet, in load_check's words and numbers.
    assert text.startswith("The model needs ") and f"at {LARGE_CTX:,} tokens" in text
    assert "would fit" in text and dialog.load_button.isEnabled()  # forceable: Load anyway

    dialog.load_button.click()
    qtbot.waitUntil(lambda: page.load_refusal is not None, timeout=HANG_GUARD_MS)
    refusal = page.load_refusal.text()
    assert sizes(refusal) == sizes(text) and sizes(text)  # the same numbers, both times
    page.load_refusal.reject()
    qtbot.waitUntil(lambda: page.load_refusal is None, timeout=HANG_GUARD_MS)


@pytest.mark.slow
def test_the_fit_shows_at_once_and_changes_with_the_context(qtbot, chat_app) -> None:
    dialog = open_from_menu(qtbot, chat_app.window.chat, "Starter model")
    first = dialog.fit_label.text()
    assert first.startswith(("Fits: needs", "Tight fit: needs")), first
    assert f"at {N_CTX:,} tokens" in first
    with qtbot.waitSignal(dialog.fit_changed, timeout=HANG_GUARD_MS):
        dialog.n_ctx.setValue(4 * N_CTX)
    second = dialog.fit_label.text()
    assert f"at {4 * N_CTX:,} tokens" in second and sizes(second)[0] != sizes(first)[0]
    with qtbot.waitSignal(dialog.fit_changed, timeout=HANG_GUARD_MS):
        dialog.type_k.setCurrentText("f16")  # and with the K cache type
    assert "KV cache f16/f16" in dialog.fit_label.text()
    dialog.reject()


@pytest.mark.slow
def test_reload_applies_new_settings_to_the_loaded_model(qtbot, loaded_chat_app) -> None:
    app = loaded_chat_app
    assert app.engine.loaded.n_ctx == N_CTX
    dialog = open_from_menu(qtbot, app.window.chat, "Load options")
    assert dialog.load_button.text() == "Reload" and dialog.n_ctx.value() == N_CTX
    dialog.n_ctx.setValue(3072)
    dialog.type_v.setCurrentText("q8_0")
    with qtbot.waitSignal(app.engine.model_loaded, timeout=LOAD_TIMEOUT_MS) as loaded:
        dialog.load_button.click()
    assert loaded.args[0].n_ctx == app.engine.loaded.n_ctx == 3072
    assert app.engine.loaded.options.kv.v.name == "q8_0"
    assert app.window.chat.load_dialog is None  # the dialog closed on Reload


def test_the_dialog_hands_its_profile_to_the_chat_page_with_no_settings_file_on_disk(
    qtbot, chat_data_dir, starter_model_path
) -> None:
    """The load takes what the dialog shows, handed over in its signal: the remembered-choices
    file is gone (removed as the dialog closes, before the chat page gets the profile) and the
    load still uses the dialog's context and K/V mode, not the defaults."""
    from app.load.load_choices import FILE_NAME

    parts, engine = fake_app(chat_data_dir)
    try:
        dialog = open_from_menu(qtbot, parts.window.chat, "Starter model")
        dialog.n_ctx.setValue(3072)
        dialog.type_k.setCurrentText("f16")
        dialog.accepted.connect(lambda: (chat_data_dir / FILE_NAME).unlink())
        with qtbot.waitSignal(dialog.load_requested, timeout=HANG_GUARD_MS) as requested:
            with qtbot.waitSignal(parts.engine.model_loaded, timeout=HANG_GUARD_MS):
                dialog.load_button.click()
        assert not (chat_data_dir / FILE_NAME).exists()
        ref, profile = requested.args
        assert (ref, profile.n_ctx, profile.kv.label) == ("starter", 3072, "f16/f16")
        (load,) = [c for c in engine.sent if isinstance(c, Load)]
        assert load.options == profile
        assert load.options.model_path == str(starter_model_path)
    finally:
        parts.window.close()
        parts.close()


def test_the_choice_is_remembered_per_model_after_a_restart(
    qtbot, chat_data_dir, starter_model_path, tmp_path
) -> None:
    from tests.gguf_factory import write_tiny_gguf

    other = write_tiny_gguf(tmp_path / "other-model.gguf", n_ctx_train=32768)
    parts, engine = fake_app(chat_data_dir)
    try:
        dialog = open_from_menu(qtbot, parts.window.chat, "Starter model")
        dialog.n_ctx.setValue(3072)
        dialog.type_v.setCurrentText("q8_0")
        with qtbot.waitSignal(parts.engine.model_loaded, timeout=HANG_GUARD_MS):
            dialog.load_button.click()
        (load,) = [c for c in engine.sent if isinstance(c, Load)]
        assert (load.options.n_ctx, load.options.kv.v.name) == (3072, "q8_0")
    finally:
        parts.window.close()
        parts.close()

    parts, engine = fake_app(chat_data_dir)  # the app again, on the same data folder
    try:
        page = parts.window.chat
        dialog = open_from_menu(qtbot, page, "Starter model")
        assert (dialog.n_ctx.value(), dialog.type_v.currentText()) == (3072, "q8_0")
        dialog.reject()
        # The one-click starter offer loads with the same remembered settings.
        with qtbot.waitSignal(parts.engine.model_loaded, timeout=HANG_GUARD_MS):
            page.offer_button.click()
        (load,) = [c for c in engine.sent if isinstance(c, Load)]
        assert (load.options.n_ctx, load.options.kv.v.name) == (3072, "q8_0")
        # Another model file uses the default load settings.
        page.open_load_dialog(str(other))
        dialog = page.load_dialog
        with qtbot.waitSignal(dialog.model_read, timeout=HANG_GUARD_MS):
            pass
        assert (dialog.n_ctx.value(), dialog.type_v.currentText()) == (N_CTX, "f16")
        dialog.reject()
    finally:
        parts.window.close()
        parts.close()


@pytest.mark.slow
def test_a_cpu_only_build_says_there_are_no_gpu_layers(qtbot, chat_app) -> None:
    if gpu_build():
        pytest.skip("this llama.cpp has a GPU backend")
    dialog = open_from_menu(qtbot, chat_app.window.chat, "Starter model")
    assert dialog.no_gpu.isVisible() and dialog.no_gpu.text() == NO_GPU
    assert not dialog.gpu_layers.isVisible()  # never "all" where there is no GPU
    shown = [w.text() for w in dialog.findChildren(type(dialog.no_gpu)) if w.isVisible()]
    assert "all" not in shown
    dialog.reject()


@pytest.mark.slow
def test_models_page_and_load_dialog_start_at_one_default_context(
    qtbot, tmp_path, monkeypatch
) -> None:
    folder = tmp_path / "fresh-data"  # no settings saved: the app's own defaults
    folder.mkdir()
    monkeypatch.setenv("KVSTUDIO_DATA_DIR", str(folder))
    parts, _engine = fake_app(folder)
    try:
        dialog = open_from_menu(qtbot, parts.window.chat, "Starter model")
        models = models_page(parts.window)
        assert dialog.n_ctx.value() == models.repo_view.context_spin.value() == DEFAULT_CONTEXT
        assert DEFAULT_CONTEXT == 8192
        dialog.reject()
    finally:
        parts.window.close()
        parts.close()


def test_a_file_that_is_no_model_is_said_in_the_dialog(qtbot, chat_app, tmp_path) -> None:
    bad = tmp_path / "not-a-model.gguf"
    bad.write_bytes(b"this is text, not a GGUF file" * 10)
    page = chat_app.window.chat
    page.picker.model_chosen.emit(str(bad))  # what the menu and Open GGUF file… do
    dialog = page.load_dialog
    with qtbot.waitSignal(dialog.model_unreadable, timeout=HANG_GUARD_MS) as unreadable:
        pass
    assert dialog.about.text() == f"Could not open the model: {unreadable.args[0]}"
    assert "GGUF" in unreadable.args[0] and not dialog.load_button.isEnabled()
    assert chat_app.engine.last_options is None
    dialog.reject()


@pytest.mark.slow
def test_the_dialog_fits_the_smallest_window(qtbot, chat_app) -> None:
    window = chat_app.window
    show_at(window, SMALL)
    dialog = open_from_menu(qtbot, window.chat, "Starter model")
    dialog.n_ctx.setValue(1 << 20)  # the longest text it shows: a refusal
    size = dialog.size().expandedTo(dialog.sizeHint())  # what it opens at, grown to show it
    assert size.width() <= SMALL.width() and size.height() <= SMALL.height()
    assert layout_problems(dialog, size, [dialog.load_button, dialog.fit_button]) == []
    # Past the trained context: the dialog offers the most that fits, one click away.
    assert dialog.fit_button.text() == "Use 32,768 tokens (the most that fit)"
    with qtbot.waitSignal(dialog.fit_changed, timeout=HANG_GUARD_MS):
        dialog.fit_button.click()
    assert dialog.n_ctx.value() == 32768 and dialog.fit.refusal is None
    assert not dialog.fit_button.isVisible()
    dialog.reject()


@pytest.mark.slow
def test_a_new_default_context_is_where_both_start(qtbot, chat_app) -> None:
    from app.ui.settings_page import SettingsPage

    window = chat_app.window
    pages = map(window.pages.widget, range(window.pages.count()))
    settings_page = next(w for w in pages if isinstance(w, SettingsPage))
    section = settings_page.load_defaults
    section.context_edit.setText("12,288")
    with qtbot.waitSignal(section.defaults_saved, timeout=HANG_GUARD_MS):
        section.save_button.click()
    dialog = open_from_menu(qtbot, window.chat, "Starter model")
    assert dialog.n_ctx.value() == models_page(window).repo_view.context_spin.value() == 12288
    dialog.reject()
