"""The one wrapper every entry point's ``main`` runs in: errors become exit codes and messages.

``run(program, main, argv)`` calls ``main(argv)`` and returns its exit code, mapping:

    VaraverkError       its ``exit_code``, with one line ``<program>: <message> (<fix>)`` on
                        stderr; the line and its traceback go to the log file
    BrokenPipeError     a quiet exit 0: the reader of stdout (``| head``) has seen enough
    KeyboardInterrupt   130, with one line saying so
    anything else       1, with one line on stderr naming the log file that holds the
                        traceback (written there even by a command that keeps no log otherwise)

``SystemExit`` (argparse's usage errors, exit 2) passes through untouched. Warnings logged
before ``main`` sets up logging (loading the settings) already read ``<program>: warning: ...``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Sequence

from varaverk import exitcodes, logs
from varaverk.errors import VaraverkError


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's raw-epilog formatter, told the terminal width as ``shutil`` would find it
    (``COLUMNS``, else the terminal, else 80). argparse builds a formatter for every
    ``add_argument`` and, given no width, imports ``shutil`` (and with it bz2 and lzma) on
    every command start, though only ``--help`` and usage errors print anything."""

    def __init__(self, prog: str, **kwargs) -> None:
        kwargs.setdefault("width", _columns() - 2)
        super().__init__(prog, **kwargs)


def _columns() -> int:
    """``shutil.get_terminal_size().columns``, with its fallback of 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80
    except (AttributeError, ValueError, OSError):
        return 80


def run(program: str, main: Callable[[Sequence[str] | None], int],
        argv: Sequence[str] | None = None) -> int:
    """Run ``main(argv)`` for the command ``program`` (``ai-index``); returns the exit code."""
    logs.early_stderr(program)
    try:
        code = main(argv)
        sys.stdout.flush()  # inside the try: a closed pipe surfaces here, not at exit
        return code
    except VaraverkError as exc:
        logs.report_error(program, exc.one_line(), exc)
        return exc.exit_code
    except BrokenPipeError:
        _quiet_stdout()
        return exitcodes.OK
    except KeyboardInterrupt:
        logs.report_error(program, "interrupted (Ctrl-C)")
        return exitcodes.INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the one place an unexpected error is reported
        where = logs.record_failure(program, exc)
        place = f"the traceback is in {where}" if where else "no log file could be written"
        print(f"{program}: unexpected error: {type(exc).__name__}: {exc} ({place})",
              file=sys.stderr)
        return exitcodes.FAILURE


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
