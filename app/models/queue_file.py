"""The download queue's state file, declared apart from app/models/saved_queue.py: that
module imports numpy (through the Hub client), which a CLI start, checking its files, must not."""

from app.platform.state_files import StateFile

QUEUE_STATE_FILE = StateFile("downloads.json", 1, "download queue", "the queue starts empty")
