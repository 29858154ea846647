"""The frozen app's entry point: the `kvstudio` command (no subcommand opens the window)."""

import sys

from app.cli import main

if __name__ == "__main__":
    sys.exit(main())
