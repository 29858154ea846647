"""The `kvstudio` command. No subcommand opens the GUI; subcommands never import Qt."""

from __future__ import annotations

import argparse
import importlib
import logging
import multiprocessing
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import NoReturn

from app import __version__
from app.commands import COMMANDS, print_error
from app.damaged_files import check_state_files
from app.platform.crash_report import CrashReporter
from app.platform.errors import AppError, BadInputError
from app.platform.paths import data_dir
from app.platform.window_check import (
    library_in_import_error,
    missing_libraries_sentence,
    window_problem,
)

log = logging.getLogger(__name__)

BAD_INPUT_EXIT = 2


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line on stderr (exit 2), no usage dump."""

    def error(self, message: str) -> NoReturn:
        print_error(message)  # it may quote an argument: a file name pasted with its escapes
        self.exit(BAD_INPUT_EXIT)


def command_module(name: str) -> ModuleType | None:
    """The module of the command `name`, imported now: each imports what its command needs at
    its top, so only the command that runs pays for that. None, said on stderr, when this
    install lacks it (a frozen build that did not collect it)."""
    try:
        return importlib.import_module(f"app.commands.{name}")
    except ModuleNotFoundError as error:
        if error.name != f"app.commands.{name}":
            raise
        print(
            f"kvstudio: the '{name}' command is missing from this install "
            f"(app/commands/{name}.py is not there); reinstall KV Studio to get it back.",
            file=sys.stderr,
        )
        return None


def build_parser(
    command: str | None = None, module: ModuleType | None = None, *, add_help: bool = True
) -> argparse.ArgumentParser:
    """The `kvstudio` parser: every command with its line of help, and the arguments of
    `command` (from its `module`) alone."""
    parser = _Parser(
        prog="kvstudio",
        description="Run GGUF models locally; see what the KV cache costs.",
        add_help=add_help,
    )
    parser.add_argument("--version", action="version", version=f"kvstudio {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log details to stderr")
    parser.add_argument(
        "--model", help="with no command: a .gguf path or 'starter' to load at start"
    )
    parser.add_argument(
        "--send",
        metavar="TEXT",
        help="with no command: send TEXT in the chat once the model has loaded",
    )
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    gui = sub.add_parser("gui", help="open the app (the default)", add_help=add_help)
    gui.add_argument("--model", help="a .gguf path or 'starter' to load at start")
    gui.add_argument(
        "--send", metavar="TEXT", help="send TEXT in the chat once the model has loaded"
    )
    gui.add_argument(
        "--screenshot",
        metavar="PNG",
        type=Path,
        help="save a picture of the window once it is shown (or the --model has loaded, or "
        "the --send reply has finished), then quit",
    )
    for name, line in COMMANDS.items():
        command_parser = sub.add_parser(name, help=line, description=line, add_help=add_help)
        if name == command and module is not None:
            module.add_arguments(command_parser)
    return parser


def named_command(argv: list[str]) -> str | None:
    """The command `argv` names, as argparse reads it (so an option's value is never taken for
    one), before any command's module is imported; None for the window."""
    known, _rest = build_parser(add_help=False).parse_known_args(argv)
    command: str | None = known.command
    return command


def _ctrl_c_stops() -> None:
    """Let Ctrl-C (SIGINT) stop every command, however it was started. A shell script that
    starts a program in the background (`kvstudio worker &`) starts it with SIGINT ignored, and
    Python then keeps it ignored: `kill -INT`, and the app's own way of stopping a worker it
    started, would do nothing, and `worker` and `serve` would run on."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: list[str] | None = None) -> int:
    # In a frozen app the engine (a multiprocessing child) starts this same executable: without
    # this it would run the CLI again instead of the engine. Outside a frozen app it does nothing.
    multiprocessing.freeze_support()
    _ctrl_c_stops()
    argv = sys.argv[1:] if argv is None else argv
    command = named_command(argv)
    module = None
    if command not in (None, "gui"):
        module = command_module(command)
        if module is None:
            return 1
    args = build_parser(command, module).parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    reporter = _report_crashes()
    try:
        if args.command in (None, "gui"):
            open_app = _window_opener()  # Qt is imported only here
            if open_app is None:
                return BAD_INPUT_EXIT
            return open_app(
                model=getattr(args, "model", None),
                send=getattr(args, "send", None),
                screenshot=getattr(args, "screenshot", None),
            )
        _check_state_files()
        assert module is not None  # a command other than gui, imported above
        return int(module.run(args) or 0)
    except BadInputError as error:
        print_error(error)
        return BAD_INPUT_EXIT
    except AppError as error:
        print_error(error)
        return 1
    except KeyboardInterrupt:
        print_error("interrupted")
        return 130
    except Exception as error:  # a bug: one sentence and a report, never only a traceback
        reporter.report(error, f"kvstudio {args.command or 'gui'}")
        return 1
    finally:
        reporter.uninstall()


def _window_opener() -> Callable[..., int] | None:
    """app.gui.open_app, or None once one sentence said why the window cannot open here (no
    display, a library Qt needs missing) instead of Qt's abort or the loader's error."""
    problem = window_problem()
    if problem is None:
        try:
            from app.gui import open_app
        except ImportError as error:
            library = library_in_import_error(error)
            if library is None:
                raise
            problem = missing_libraries_sentence([library])
        else:
            return open_app
    print_error(problem)
    return None


def _report_crashes() -> CrashReporter:
    """Reports go to the data folder's logs/ (the GUI's too); the sentence goes to stderr."""

    def tell(path: Path | None, summary: str) -> None:
        where = f"a report was saved to {path}" if path else "no report could be saved"
        print_error(f"unexpected error ({summary}); {where}.")

    try:
        folder = data_dir()
    except OSError:
        folder = Path(tempfile.gettempdir()) / "kvstudio"
    reporter = CrashReporter(folder, tell)
    reporter.install(faults=False)  # a CLI crash prints to the terminal it runs in
    return reporter


def _check_state_files() -> None:
    """Damaged settings, model folders or download queue: set aside, one line each, and the
    command runs on. (No command opens the conversations file; the GUI repairs that.)"""
    try:
        notices = check_state_files(data_dir())
    except OSError as error:
        log.warning("could not check the data folder's files (%s)", error)
        return
    for notice in notices:
        print_error(notice)
