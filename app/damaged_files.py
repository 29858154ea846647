"""The first thing every start does, GUI and CLI alike: set aside the app's damaged state files.

Each file is declared by the package that writes it (StateFile); this list sits at the top of
the app because it names files of several packages, which must not know about each other.
"""

from __future__ import annotations

from pathlib import Path

from app.load.choices_file import LOAD_CHOICES_STATE_FILE
from app.models.model_folders import FOLDERS_STATE_FILE
from app.models.queue_file import QUEUE_STATE_FILE
from app.platform.state_files import set_aside_damaged
from app.state.settings import load_settings


def check_state_files(folder: Path) -> list[str]:
    """Set aside every damaged state file of the data folder `folder`; one notice for each."""
    notices = []
    settings_notice = load_settings(folder).notice
    if settings_notice:
        notices.append(settings_notice)
    files = (FOLDERS_STATE_FILE, QUEUE_STATE_FILE, LOAD_CHOICES_STATE_FILE)
    return notices + set_aside_damaged(folder, files)
