"""One module per `kvstudio` subcommand.

Each module defines `NAME`, `HELP`, `add_arguments(parser)` and `run(args) -> int`.
Modules must stay light at import time (no Qt, no llama_cpp): heavy imports go
inside `run`, so `kvstudio --help` and bad-input errors answer at once.
"""

from __future__ import annotations

# The order `kvstudio --help` lists them in.
COMMAND_MODULES = (
    "run",
    "serve",
    "worker",
    "doctor",
    "fit",
    "bench",
    "pull",
    "ls",
    "rm",
    "backend",
    "selftest",
)

# Long enough for a sentence naming a deep path twice; short of a 300 KB "name".
ERROR_LIMIT = 1000


def print_error(message: object) -> None:
    """`kvstudio: MESSAGE` on stderr, the one way commands report a failure or a notice.
    Messages quote file names, a file's metadata and the Hub's answers: they are cleaned
    (no escape sequence, no bidi override) and kept to one line of reasonable length."""
    import sys

    from app.platform.safe_text import safe_text

    print(f"kvstudio: {safe_text(message, ERROR_LIMIT)}", file=sys.stderr)
