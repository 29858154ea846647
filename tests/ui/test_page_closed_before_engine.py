"""A chat page closed while its engine lives on (the engine client outlives every page that
listens to it) is forgotten by the engine's signals: a load that makes the engine busy after
the page is gone must not call into the deleted page (Qt reports that as an error in its event
loop, and it failed a CI run through a sibling of this bug)."""

from __future__ import annotations

from pathlib import Path

import shiboken6

from app.chats.store import ChatStore
from app.load.profile import LoadProfile
from app.services.engine_client import EngineClient
from app.services.message_bridge import MessageBridge
from app.state.settings import SettingsFile
from app.ui.chat.chat_page import ChatPage
from tests.engine_threads import ENGINE_THREADS


def test_the_engine_turning_busy_after_the_page_is_gone_is_quiet(
    qtbot, chat_data_dir: Path, starter_model_path: Path
) -> None:
    client = EngineClient()
    try:
        page = ChatPage(
            client,
            ChatStore(chat_data_dir / "chats.sqlite3"),
            SettingsFile(chat_data_dir),
            MessageBridge(),
        )
        page.show()
        shiboken6.delete(page)
        options = LoadProfile(
            model_path=str(starter_model_path), n_ctx=512, n_threads=ENGINE_THREADS
        )
        # busy_changed(True) now, busy_changed(False) once loaded: pytest-qt fails the test on
        # an error raised in any slot meanwhile.
        with qtbot.waitSignal(client.model_loaded, timeout=120_000):
            client.load(options)
        assert not client.busy
    finally:
        client.shutdown()
