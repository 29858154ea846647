"""The remembered load choices' state file, declared apart from app/load/load_choices.py: that
module imports numpy (through the GGUF header), which every CLI start, checking its files, and
so every engine process spawned from the CLI (spawn runs the main module's imports again),
must not."""

from app.platform.state_files import StateFile

LOAD_CHOICES_STATE_FILE = StateFile(
    "model_load_settings.json",
    1,
    "model load settings",
    "every model loads with the default load settings",
)
