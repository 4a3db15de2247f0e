"""The progress a long command shows on a terminal (`simulate`, `experiment`): the consoles it
writes to (results on stdout, progress and log lines on stderr) and one bar per task, in bytes
(its description, the bar, the bytes done of the total, the time elapsed). Shown only where
stderr is a terminal and not turned off (`--no-progress`): a pipe or a CI log gets none."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported when a command draws: `--help` starts without it
    from rich.console import Console
    from rich.progress import Progress


def consoles() -> tuple[Console, Console]:
    """(stdout, stderr) consoles. A width comes from the terminal, else from COLUMNS, else (piped
    or captured: make demo | tee, CI logs) 132; a table is laid out for it."""
    from rich.console import Console

    width = None if os.environ.get("COLUMNS", "").isdigit() else 132
    out, err = Console(), Console(stderr=True)
    if not out.is_terminal and width:
        out = Console(width=width)
    if not err.is_terminal and width:
        err = Console(stderr=True, width=width)
    return out, err


def shown(console: Console, no_progress: bool) -> bool:
    """Whether a command draws its progress: on a terminal, unless told not to."""
    return not no_progress and console.is_terminal


def byte_progress(console: Console, *, show: bool) -> Progress:
    """The bars (a context manager: drawn while it is entered, the last state left on the screen)."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description:<28}"), BarColumn(), DownloadColumn(), TimeElapsedColumn(),
                    console=console, disable=not show, transient=False)
