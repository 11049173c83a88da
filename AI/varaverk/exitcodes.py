"""Exit codes shared by every entry point, so scripts and cron wrappers can act on them.

The numbers follow sysexits.h where one fits. ``TABLE`` is the one list of them with their
meanings: README.md's exit-code table must equal it (a test checks), and each command's
``--help`` epilog is made from it (``epilog``). An error of the library carries its code
(``varaverk.errors.VaraverkError.exit_code``), so the code that raises decides, once.
"""

from __future__ import annotations

OK = 0            # done; also "AI_ENABLED=false, nothing to do" and "documentation does not cover it"
FAILURE = 1       # an unexpected error; the log has the traceback
FINDINGS = 1      # ai-scan-shell found a destructive operation (grep's "found" code)
USAGE = 2         # bad command line (argparse's own code)
MISMATCH = 65     # EX_DATAERR: the index was built with another embedding backend/model; use --force
NO_INDEX = 66     # EX_NOINPUT: no usable index (none yet, or not one of ours); run ai-index
UNAVAILABLE = 69  # EX_UNAVAILABLE: no model server reachable (ai-query printed the search results)
EMBED_FAILED = 70  # EX_SOFTWARE: ai-index got no vector for any chunk it had to embed
LOCKED = 75       # EX_TEMPFAIL: another run holds the lock past the timeout; try again later
CONFIG = 78       # EX_CONFIG: the configuration is invalid (the message names the key)
INTERRUPTED = 130  # 128 + SIGINT: stopped with Ctrl-C; nothing half-written was kept


class ExitCode:
    """One row of the table: the number and what it means to a caller (Markdown allowed).

    A plain class, not a named tuple: every command imports this module at start-up, and a
    named tuple costs the no-op ``ai-index`` typing and a compile of its ``__new__``."""

    __slots__ = ("code", "meaning")

    def __init__(self, code: int, meaning: str):
        self.code = code
        self.meaning = meaning


TABLE: tuple[ExitCode, ...] = (
    ExitCode(OK, 'done; also "AI_ENABLED=false, nothing to do" and "the documentation does not '
                 'cover this"'),
    ExitCode(FAILURE, "unexpected failure (the log file has the traceback); `ai-scan-shell`: a "
                      "destructive operation was found"),
    ExitCode(USAGE, "bad command line"),
    ExitCode(MISMATCH, "the index was built with another embedding backend/model: run "
                       "`ai-index --force`"),
    ExitCode(NO_INDEX, "no usable index: none yet (run `ai-index`), or the file is not a Varaverk "
                       "index of this version (the message names it: move it away, then "
                       "`ai-index`)"),
    ExitCode(UNAVAILABLE, "no model server reachable (`ai-query` printed the search results)"),
    ExitCode(EMBED_FAILED, "`ai-index`: no chunk it had to embed got a vector (the log names each "
                           "failure; the files are retried next run)"),
    ExitCode(LOCKED, "another run holds the lock past the timeout (the message names it)"),
    ExitCode(CONFIG, "invalid configuration (the message names the key and what it allows)"),
    ExitCode(INTERRUPTED, "interrupted with Ctrl-C; nothing half-written was kept"),
)


def meaning(code: int) -> str:
    """The table's meaning of ``code``; KeyError for a code not in the table."""
    for row in TABLE:
        if row.code == code:
            return row.meaning
    raise KeyError(code)


def epilog(*codes: int) -> str:
    """An ``--help`` epilog listing ``codes`` (all of the table when none are given) with their
    meanings from ``TABLE``; use with ``argparse.RawDescriptionHelpFormatter``."""
    wanted = set(codes) if codes else {row.code for row in TABLE}
    lines = ["exit codes:"]
    for row in TABLE:
        if row.code in wanted:
            lines += _wrap(f"  {row.code:<4}", row.meaning.replace("`", ""))
    return "\n".join(lines) + "\n"


def _wrap(first: str, text: str, width: int = 92) -> list[str]:
    # Greedy word wrap under a hanging indent. Not textwrap: every command builds its epilog
    # at start-up, and argparse itself imports textwrap only to print --help.
    lines, line = [], first
    for word in text.split():
        if len(line) + 1 + len(word) > width and line.strip():
            lines.append(line)
            line = " " * len(first)
        line += word if line.endswith(" ") or line == first else " " + word
    return lines + [line]
