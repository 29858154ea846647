"""The first-run dialog's words, offscreen, on real detection over fake sysfs trees shaped like
the kernel's (tests/gpu_sysfs.py): with no GPU it is one plain sentence and Continue, which
Enter presses; with an RX 7900 XTX it names the package and where to get it before it offers a
file. No install runs here (tests/ui/test_first_run.py installs real packages)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt

from app.backends.gpu_advice import NO_GPU, RELEASES_PAGE
from app.backends.gpu_detect import Gpu, detect_gpus
from app.backends.store import BackendStore
from app.ui.first_run import FirstRunDialog
from tests.gpu_sysfs import INTEL_IGPU, RX_7900_XTX, PciGpu, fake_sysfs
from tests.waits import HANG_GUARD_MS


def dialog_on(qtbot, tmp_path: Path, *gpus: PciGpu) -> FirstRunDialog:  # type: ignore[no-untyped-def]
    drm = fake_sysfs(tmp_path / "sys", *gpus)

    def detect() -> list[Gpu]:
        return detect_gpus(drm, nvml=None, vulkaninfo=None, system="Linux", machine="x86_64")

    dialog = FirstRunDialog(BackendStore(tmp_path / "data"), detect)
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.detection_finished, timeout=HANG_GUARD_MS):
        dialog.show()
    return dialog


def test_no_gpu_is_one_sentence_and_enter_continues(qtbot, tmp_path: Path) -> None:
    dialog = dialog_on(qtbot, tmp_path, INTEL_IGPU)  # an Intel iGPU: no package for it
    assert dialog.advice.text() == NO_GPU
    assert NO_GPU == "No GPU found: KV Studio runs on the CPU; everything works, slower."
    assert not dialog.gpus.isVisible()  # no second "No GPU found."
    for hidden in (dialog.file_button, dialog.url, dialog.url_button, dialog.source):
        assert not hidden.isVisible()
    assert dialog.keep_button.text() == "Continue"
    assert dialog.keep_button.isDefault()
    qtbot.keyClick(dialog, Qt.Key.Key_Return)
    assert dialog.result() == FirstRunDialog.DialogCode.Accepted
    assert not dialog.isVisible()


def test_a_gpu_gets_the_package_named_and_where_to_get_it_before_a_file(
    qtbot, tmp_path: Path
) -> None:
    dialog = dialog_on(qtbot, tmp_path, RX_7900_XTX)
    assert "rocm-rdna3 backend" in dialog.advice.text()
    source = dialog.source.text()
    assert source == (
        "Download the rocm-rdna3 package (kvstudio-backend-rocm-rdna3-<version>-"
        f"{_platform_tag()}.tar.gz) from the project's release page, {RELEASES_PAGE}, "
        "then install it from the file."
    )
    assert dialog.source.isVisible() and dialog.file_button.isVisible()
    # Read top to bottom: the package and its source come before the file button.
    assert dialog.source.geometry().bottom() < dialog.file_button.geometry().top()
    assert dialog.keep_button.text() == "Keep the built-in CPU backend"


def _platform_tag() -> str:
    import platform

    return f"{platform.system().lower()}-{platform.machine()}"
