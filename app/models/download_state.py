"""One download as the queue reports it (app.models.download_queue): where it stands
(queued, downloading, paused, finished, failed, cancelled), its bytes and speed, and what it
ended with (the model, or the error to show)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from app.models.hub import GgufEntry
from app.models.library import LibraryModel
from app.platform.errors import AppError


class DownloadState(enum.Enum):
    QUEUED = "queued"
    DOWNLOADING = "downloading"
    PAUSED = "paused"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_active(self) -> bool:
        return self in (DownloadState.QUEUED, DownloadState.DOWNLOADING)

    @property
    def can_resume(self) -> bool:
        return self in (DownloadState.PAUSED, DownloadState.FAILED, DownloadState.CANCELLED)


@dataclass(frozen=True)
class Download:
    """One download as it stands (a snapshot; the queue replaces it on every change)."""

    key: str
    entry: GgufEntry
    folder: Path | None = None  # where it goes; None: the Hugging Face cache
    state: DownloadState = DownloadState.QUEUED
    done_bytes: int = 0  # on disk, all parts
    speed: float = 0.0  # bytes per second, recent average (0 unless downloading)
    error: AppError | None = None  # why it failed; str(error) is the sentence to show
    model: LibraryModel | None = None  # the finished model, as the library lists it

    @property
    def total_bytes(self) -> int:
        return self.entry.total_size

    @property
    def message(self) -> str:
        return str(self.error) if self.error is not None else ""

    @property
    def eta_seconds(self) -> float | None:
        if self.state is not DownloadState.DOWNLOADING or self.speed <= 0:
            return None
        return max(0.0, (self.total_bytes - self.done_bytes) / self.speed)

    @property
    def is_active(self) -> bool:
        return self.state.is_active


def download_key(entry: GgufEntry) -> str:
    return f"{entry.repo_id}/{entry.first_file}"
