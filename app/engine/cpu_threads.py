"""How many CPU threads llama.cpp gets for a load that does not choose its own.

llama-cpp-python's default is half the cores to generate and all of them to read a prompt. On a
machine shared with other work that can be too many: llama.cpp's threads meet at a barrier after
every operation and, by OpenMP's default, spin there a while, so a thread waiting for a core
taken by another program costs its partners their time too (beside other load, 64 tokens of the
starter decoded with 2 threads took 103 s and 27 s of CPU, with 1 thread 20 s and 3.4 s).
KVSTUDIO_THREADS sets the number for every load that does not set it (the load dialog's
Threads, `--threads`), for both generating and reading prompts.
"""

from __future__ import annotations

import os

from app.platform.errors import BadInputError

ENV = "KVSTUDIO_THREADS"


def threads_for(chosen: int | None) -> int | None:
    """The threads of a load that chose `chosen` (None: not chosen): the choice, else
    KVSTUDIO_THREADS, else None (llama-cpp-python's default). Raises BadInputError naming the
    variable when its value is not a whole number from 1 up."""
    if chosen:
        return chosen
    typed = os.environ.get(ENV, "").strip()
    if not typed:
        return None
    if not typed.isdigit() or int(typed) < 1:
        raise BadInputError(f"{ENV} must be a whole number of threads from 1 up; it is {typed!r}.")
    return int(typed)
