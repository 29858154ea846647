"""My models' Delete removes a model's own files only: an HF cache entry that links out of the
library loses its link, and the file it points at survives (issue 11, secrets and files).
Failed before issue 11: the GUI, like `kvstudio rm`, deleted the link's target."""

from __future__ import annotations

import hashlib

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from tests.gguf_factory import write_tiny_gguf
from tests.ui.models.page_driver import WAIT, make_page, shut


def test_delete_keeps_the_target_of_a_link_out_of_the_library(qtbot, env, monkeypatch) -> None:
    precious = write_tiny_gguf(env / "precious-Q8_0.gguf", seed=7)
    digest = hashlib.sha256(precious.read_bytes()).hexdigest()
    snapshot = env / "hf" / "hub" / "models--evil--link-GGUF" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    link = snapshot / "link-Q8_0.gguf"
    link.symlink_to(precious)

    page = make_page(qtbot, env)
    lib = page.library_view
    with qtbot.waitSignal(lib.model.modelReset, timeout=WAIT):
        lib.refresh()
    assert lib.select_path(str(link))
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    qtbot.mouseClick(lib.delete_button, Qt.MouseButton.LeftButton)
    assert not link.is_symlink()
    assert hashlib.sha256(precious.read_bytes()).hexdigest() == digest
    shut(page)
