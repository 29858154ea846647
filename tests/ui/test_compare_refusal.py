"""The dashboard's Compare refuses, in one sentence, a run whose loads cannot fit."""

from __future__ import annotations

import pytest

from tests.child_processes import running_children
from tests.waits import HANG_GUARD_MS

pytest.importorskip("pytestqt")

from app.platform.probes.psutil_probe import PsutilProbe  # noqa: E402
from app.services.compare_runner import CompareRunner  # noqa: E402


def test_compare_that_cannot_fit_fails_in_words_before_any_engine(
    qtbot, starter_model_path, monkeypatch
):
    monkeypatch.setenv("KVSTUDIO_FREE_MEMORY", "1MiB")  # the probes' cap: a tiny device
    runner = CompareRunner(probe=PsutilProbe())
    before = running_children()
    with qtbot.waitSignal(runner.failed, timeout=HANG_GUARD_MS) as failed:
        runner.start(str(starter_model_path), n_ctx=4096, depth=0)
    runner.wait()
    message = failed.args[0]
    assert message.startswith("The model needs ") and message.endswith(
        "; lower the context in the Compare settings."
    )
    assert "--force" not in message  # CLI advice has no place in the window
    assert running_children() <= before
