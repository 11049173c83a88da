"""One file, one failure: the per-file guard of an index run.

Reading, decoding, front matter, chunking, masking and link resolution of one file run inside
``attempt``. Whatever that work raises (a parser's bug, a ``RecursionError``, a
``MemoryError`` from a bounded parser) and any overrun of the file's time bound comes back
as that file's skip reason, logged with the file's name; the index run goes on. Errors of
the run itself pass through: ``VaraverkError`` (no embedder, an index of another model, a
busy lock) and interrupts (Ctrl-C, ``SystemExit``).

The time bound is cooperative. ``attempt`` sets a deadline in a context variable and the
parsers' loops call ``checkpoint``, which raises ``FileOverrun`` once it has passed. No
signal is used: ``SIGALRM`` works only in the main thread, and it would interrupt whatever
that thread is doing at that moment (a dock request, an embedding call, a SQLite write). A
context variable belongs to the thread (or task) that set it, so index runs in several
threads never cut each other short. The cost: a single step that does not come back to a
loop (one regular expression match, one tokenizer call) is not cut short; every parser here
is linear and every document at most 8 MiB, so such a step is bounded anyway.

Time spent in a nested ``attempt`` (the notes' link titles, read while the first note of a
source is chunked) counts against the nested file, not the outer one.
"""

from __future__ import annotations

import logging
import time
from contextvars import ContextVar
from typing import Callable, TypeVar

from varaverk.errors import VaraverkError

log = logging.getLogger(__name__)

# Seconds one file's decoding, chunking and masking may take: a base, and more per MiB of
# the file. Linear parsers chunk an 8 MiB file in 5 to 15 CPU seconds here
# (tests/benchmarks/bench_parsers.py); the bound leaves room for a slower machine under load.
FILE_SECONDS = 60.0
SECONDS_PER_MIB = 15.0
REASON_FAILED = "could not be chunked"
_DETAIL_CHARS = 200  # of an exception's message, in a skip reason

T = TypeVar("T")

# [deadline] (time.monotonic) of the file being worked on in this context; None outside.
_deadline: ContextVar[list[float] | None] = ContextVar("varaverk_file_deadline", default=None)


class FileOverrun(Exception):
    """The file being chunked has used up its time bound (raised by ``checkpoint``)."""


def checkpoint() -> None:
    """Raise ``FileOverrun`` when the current file's deadline has passed.

    Cheap (a context variable and a clock read): parsers call it once per line or item.
    Does nothing outside ``attempt``.
    """
    deadline = _deadline.get()
    if deadline is not None and time.monotonic() > deadline[0]:
        raise FileOverrun("the file's time bound has passed")


def attempt(path: str, work: Callable[[], T], seconds: float | None = None, size: int = 0
            ) -> tuple[T | None, str]:
    """Run ``work()`` for the file ``path`` under the guard.

    Args:
        path: the file, named in the log. work: reads, decodes and chunks it.
        seconds: its time bound; None means ``FILE_SECONDS`` plus ``SECONDS_PER_MIB`` for
            each MiB of ``size`` (the file's bytes).

    Returns:
        ``(work's result, "")``, or ``(None, reason)`` when it failed: the reason starts with
        ``REASON_FAILED`` and says why (``could not be chunked (RecursionError: ...)``).

    Raises:
        VaraverkError, KeyboardInterrupt, SystemExit: errors of the run, not of the file.
    """
    limit = FILE_SECONDS + SECONDS_PER_MIB * size / (1 << 20) if seconds is None else seconds
    outer = _deadline.get()
    started = time.monotonic()
    token = _deadline.set([started + limit])
    try:
        return work(), ""
    except VaraverkError:
        raise
    except FileOverrun:
        reason = f"{REASON_FAILED} (took more than {limit:g} s)"
    except Exception as exc:  # noqa: BLE001 - one file's failure, whatever it is
        reason = f"{REASON_FAILED} ({_describe(exc)})"
        log.debug("%s: %s", path, reason, exc_info=True)
    finally:
        _deadline.reset(token)
        if outer is not None:  # the nested file's time is not the outer file's
            outer[0] += time.monotonic() - started
    log.warning("%s: skipped: %s", path, reason)
    return None, reason


def _describe(exc: Exception) -> str:
    """``Type: first line of the message`` (shortened), or what the type means."""
    if isinstance(exc, RecursionError):
        return "RecursionError: nested too deeply"
    if isinstance(exc, MemoryError):
        return "MemoryError: too large to hold in memory"
    message = (str(exc).strip().splitlines() or [""])[0]
    if len(message) > _DETAIL_CHARS:
        message = message[:_DETAIL_CHARS] + "\u2026"
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
