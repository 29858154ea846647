"""The Settings page in the real app (build_app, offscreen): the Hugging Face token reaches the
Hub client and the Models page and no log; a model folder added there is in My models and
`kvstudio ls`; bad load defaults get one sentence and good ones are what the next load uses;
the backend line leads to the Backends page. Theme tests: tests/ui/test_settings_theme.py."""

from __future__ import annotations

import io
import json
import logging
import stat
from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication, QFileDialog

from app.kv.kv_types import KvMode
from app.models.hub import fetch_remote_header
from app.platform.app_log import log_file_path, start_log_file
from app.platform.errors import GatedRepoError
from tests.cli_runner import kvstudio
from tests.gguf_factory import write_tiny_gguf
from tests.ui.conftest import LOAD_TIMEOUT_MS
from tests.waits import HANG_GUARD_MS

WAIT = HANG_GUARD_MS
GATED = "acme/gated-tiny-GGUF"
GATED_FILE = "gated-Q8_0.gguf"
TOKEN = "hf_test_token_with_access"  # the one the test Hub grants the gated repo to


def settings_page(parts):
    from app.ui.settings_page import SettingsPage

    parts.window.show_page("Settings")
    QApplication.processEvents()  # the page's layout runs on its first show
    page = parts.window.pages.currentWidget()
    assert isinstance(page, SettingsPage)
    return page


def models_page(parts):
    from app.ui.models.page import ModelsPage

    return parts.window.findChild(ModelsPage)


@pytest.fixture
def log_capture(chat_data_dir: Path):
    """The app's log file as open_app starts it, and every record of every logger at DEBUG
    (before the file's redaction), for the test's duration."""
    start_log_file(chat_data_dir, "built-in")
    everything = io.StringIO()
    handler = logging.StreamHandler(everything)
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    old_level = root.level
    root.setLevel(logging.DEBUG)
    root.addHandler(handler)
    yield everything
    root.removeHandler(handler)
    root.setLevel(old_level)
    for h in list(root.handlers):
        if isinstance(h, logging.FileHandler) and Path(h.baseFilename) == log_file_path(
            chat_data_dir
        ):
            root.removeHandler(h)
            h.close()


@pytest.mark.slow
def test_a_token_set_on_settings_reaches_the_hub_and_the_models_page_and_no_log(
    qtbot, hub_env, chat_app, log_capture, tiny_gguf, tmp_path
) -> None:
    hub_env.add_repo(GATED, {GATED_FILE: tiny_gguf("gated.gguf", seed=5)}, gated=True)
    with pytest.raises(GatedRepoError):
        fetch_remote_header(GATED, GATED_FILE)
    page = settings_page(chat_app)
    assert page.token.state_label.text() == "No token is saved."

    page.token.set_button.click()
    dialog = page.token.token_dialog
    qtbot.waitUntil(dialog.isVisible, timeout=WAIT)
    dialog.token_edit.setText(TOKEN)
    with qtbot.waitSignal(page.token_changed, timeout=WAIT):
        dialog.buttons.button(dialog.buttons.StandardButton.Save).click()

    # Shown masked, stored where the app keeps it (a 0600 file here: KVSTUDIO_NO_KEYRING).
    assert page.token.state_label.text() == "Saved. A token is saved (hf_…cess)."
    assert page.token.set_button.text() == "Replace token…"
    token_file = tmp_path / "hf-home" / "token"
    assert token_file.read_text() == TOKEN
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    # The Hub client reads the gated file's header with it; the Models page knows it is there.
    assert len(fetch_remote_header(GATED, GATED_FILE).tensors) > 0
    models = models_page(chat_app)
    models.token_button.click()
    assert "hf_…cess" in models.token_dialog.current_label.text()
    models.token_dialog.reject()

    page.token.remove_button.click()
    assert page.token.state_label.text() == "Removed. No token is saved."
    assert not token_file.exists()
    assert not page.token.remove_button.isVisible()

    logged = log_file_path(chat_app.settings.folder).read_text(encoding="utf-8")
    assert "Hugging Face token saved" in logged  # the log was written while it happened
    assert TOKEN not in logged
    assert TOKEN not in log_capture.getvalue()
    assert TOKEN not in page.token.state_label.text()


@pytest.mark.slow
def test_a_folder_added_on_settings_is_in_my_models_and_kvstudio_ls(
    qtbot, chat_app, tmp_path, monkeypatch
) -> None:
    folder = tmp_path / "my-models"
    folder.mkdir()
    model = write_tiny_gguf(folder / "mine-Q8_0.gguf", seed=7)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    page = settings_page(chat_app)
    assert page.folders.data_label.text() == str(chat_app.settings.folder)
    library = models_page(chat_app).library_view

    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *_a, **_k: str(folder))
    with qtbot.waitSignal(library.model.modelReset, timeout=WAIT):
        page.folders.add_button.click()
    assert page.folders.listed_folders() == [folder.resolve()]
    assert library.select_path(str(model))
    listed = kvstudio("ls", "--json")
    assert str(model) in [m["path"] for m in json.loads(listed.stdout)]

    page.folders.add_folder(folder)  # twice: said, not listed twice
    assert page.folders.message.text() == f"{folder} is already listed."
    page.folders.add_folder(tmp_path / "nowhere")
    assert (
        page.folders.message.text() == f"{tmp_path / 'nowhere'} is not a folder that exists here."
    )

    page.folders.folder_list.setCurrentRow(0)
    with qtbot.waitSignal(library.model.modelReset, timeout=WAIT):
        page.folders.remove_button.click()
    assert page.folders.listed_folders() == []
    assert not library.select_path(str(model))
    assert model.exists()  # removing a folder from the list deletes nothing
    listed = kvstudio("ls", "--json")
    assert str(model) not in [m["path"] for m in json.loads(listed.stdout)]


@pytest.mark.slow
def test_a_folder_added_on_my_models_shows_on_settings(qtbot, chat_app, tmp_path, monkeypatch):
    folder = tmp_path / "added-elsewhere"
    folder.mkdir()
    library = models_page(chat_app).library_view
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *_a, **_k: str(folder))
    library.add_folder_button.click()
    page = settings_page(chat_app)  # shown again: it re-reads the one list
    assert page.folders.listed_folders() == [folder.resolve()]


@pytest.mark.parametrize(
    ("context", "layers", "sentence"),
    [
        ("0", "all", "The context length must be a whole number of tokens from 256 to "),
        ("lots", "all", "not 'lots'."),
    ],
)
def test_a_bad_default_gets_one_sentence_and_changes_nothing(
    chat_app, context, layers, sentence
) -> None:
    page = settings_page(chat_app)
    before = chat_app.settings.settings
    page.load_defaults.context_edit.setText(context)
    page.load_defaults.gpu_layers_edit.setText(layers)
    page.load_defaults.save_button.click()
    shown = page.load_defaults.message.text()
    assert sentence in shown and shown.count(".") <= 2 and "\n" not in shown
    assert chat_app.settings.settings == before
    saved = json.loads((chat_app.settings.folder / "settings.json").read_text())
    assert saved["n_ctx"] == before.n_ctx


def test_bad_gpu_layers_get_one_sentence() -> None:
    from app.platform.errors import BadInputError
    from app.ui.settings_load_defaults import parse_gpu_layers

    assert parse_gpu_layers("all") == -1 and parse_gpu_layers(" 12 ") == 12
    with pytest.raises(BadInputError) as refused:
        parse_gpu_layers("-3")
    assert str(refused.value) == (
        "GPU layers must be 'all' or a whole number from 0 to 999, not '-3'."
    )


@pytest.mark.slow
def test_a_cpu_only_backend_shows_no_gpu_layers_and_keeps_the_saved_number(chat_app) -> None:
    """This machine's backend has no GPU: the field says so (as the load dialog does), is not
    editable, and saving other defaults keeps the number chosen for a GPU backend."""
    from app.ui.chat.load_dialog import NO_GPU

    chat_app.settings.update(n_gpu_layers=20)
    page = settings_page(chat_app)
    field = page.load_defaults.gpu_layers_edit
    assert field.text() == NO_GPU and not field.isEnabled()
    page.load_defaults.context_edit.setText("4096")
    page.load_defaults.save_button.click()
    assert chat_app.settings.settings.n_ctx == 4096
    assert chat_app.settings.settings.n_gpu_layers == 20


@pytest.mark.slow
def test_the_default_context_set_on_settings_is_what_the_next_load_uses(qtbot, chat_app) -> None:
    page = settings_page(chat_app)
    page.load_defaults.context_edit.setText("1,536")
    page.load_defaults.type_k.setCurrentText("f16")
    with qtbot.waitSignal(page.load_defaults.defaults_saved, timeout=WAIT):
        page.load_defaults.save_button.click()
    assert page.load_defaults.message.text() == (
        "Saved: the next load uses 1,536 tokens of context, K f16 / V f16 "
        "(CPU only: no GPU layers)."
    )
    chat = chat_app.window.chat
    chat_app.window.show_page("Chat")
    with qtbot.waitSignal(chat_app.engine.model_loaded, timeout=LOAD_TIMEOUT_MS) as loaded:
        chat.offer_button.click()
    assert loaded.args[0].n_ctx == 1536
    assert loaded.args[0].options.kv == KvMode.parse("f16/f16")


@pytest.mark.slow
def test_the_backend_line_names_the_running_backend_and_leads_to_its_page(qtbot, chat_app) -> None:
    from app.ui.backends_page import BackendsPage

    page = settings_page(chat_app)
    assert page.backend.summary.text() == (
        "The engine runs built-in (llama-cpp-python's own build); not verified in this session."
    )
    page.backend.open_button.click()
    assert isinstance(chat_app.window.pages.currentWidget(), BackendsPage)
