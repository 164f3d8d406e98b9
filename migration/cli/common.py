"""What every command of the CLI shares: exit codes and the consoles."""

from __future__ import annotations

import sys

from rich.console import Console

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3

# Wide tables when piped or captured (reports, CI logs); the terminal's width otherwise.
console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)
