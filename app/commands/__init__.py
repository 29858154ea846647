"""One module per `kvstudio` subcommand.

Each module defines `NAME`, `HELP`, `add_arguments(parser)` and `run(args) -> int`.
Modules must stay light at import time (no Qt, no llama_cpp): heavy imports go
inside `run`, so `kvstudio --help` and bad-input errors answer at once.
"""

# The order `kvstudio --help` lists them in.
COMMAND_MODULES = (
    "run",
    "serve",
    "doctor",
    "fit",
    "bench",
    "pull",
    "ls",
    "rm",
    "backend",
    "selftest",
)
