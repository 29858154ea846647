"""When to stop restarting an engine that keeps dying on one model.

A file llama.cpp aborts on would otherwise crash a fresh engine on every message: after
CRASHES_BEFORE_GIVING_UP deaths in a row on one model it is not reloaded by itself, until
the user loads a model (or a reply finishes, which shows the model works).
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

CRASHES_BEFORE_GIVING_UP = 3


class CrashStreak:
    """Engine deaths in a row, and the model they happened with."""

    def __init__(self) -> None:
        self.model: str | None = None
        self.in_a_row = 0

    def count(self, model: str) -> bool:
        """One more death with `model` loaded or loading; True once it is time to give up."""
        if model != self.model:
            self.model, self.in_a_row = model, 0
        self.in_a_row += 1
        if self.in_a_row < CRASHES_BEFORE_GIVING_UP:
            return False
        log.error(
            "the engine died %d times in a row with %s; not reloading it", self.in_a_row, model
        )
        return True

    def reset(self) -> None:
        """The model works, or the user chose one: only crashes from now on count."""
        self.in_a_row = 0

    @property
    def gave_up_on(self) -> str | None:
        """The model given up on, or None."""
        return self.model if self.in_a_row >= CRASHES_BEFORE_GIVING_UP else None
