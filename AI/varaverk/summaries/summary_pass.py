"""The summary pass (``ai-index --summaries``): summarise every indexed file that lacks a current
summary, one at a time, each committed on its own, within a time bound.

Which files: those ``varaverk.index.store.summaries.todo`` lists for the model in use (no
summary, or one made from other content or by another model), in path order. Each summary is
made from the file's stored chunks (masked as the index holds them) and written in its own
transaction with the content hash it was made from; a pass that is killed keeps every summary
it finished and nothing half-written, and the next pass goes on with the rest. A refresh that
changes a file meanwhile makes that summary stale (its hash no longer matches): it is remade
next time, never shown as current.

Two passes never run at once: the pass holds ``<index>.summaries.lock`` (not the index lock,
so a refresh is never kept waiting behind a long model pass). Each of its writes takes the
index lock for that write alone: an index run holds its write transaction from its first batch
to its end, so the pass waits for it as another run would (``AI_INDEX_LOCK_TIMEOUT``, then
``LockBusy`` naming it), never SQLite's "database is locked".
"""

from __future__ import annotations

import datetime
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from varaverk.index.store.errors import IndexMissing
from varaverk.index.store.index import Index
from varaverk.index.store.summaries import Summary
from varaverk.locking import index_lock
from varaverk.summaries.extractive import EXTRACTIVE_MODEL, extractive_summary

log = logging.getLogger(__name__)

Summariser = Callable[[list], str]  # a file's chunks (document order) -> summary text
Progress = Callable[[int, int, str], None]  # (done, total, path) after each file


@dataclass
class PassReport:
    """What one pass did.

    Attributes:
        model: the summary model (``extractive`` or ``backend/model``).
        todo: files that needed a summary when the pass began.
        made: summaries written; failed: files the model failed on (retried next pass).
        dropped: summaries of files the index no longer holds, deleted.
        timed_out: the pass stopped at ``AI_SUMMARY_SECONDS`` with files left.
        seconds: wall time of the pass.
        failures: ``[(path, message)]``.
    """

    model: str = ""
    todo: int = 0
    made: int = 0
    failed: int = 0
    dropped: int = 0
    timed_out: bool = False
    seconds: float = 0.0
    failures: list[tuple[str, str]] = field(default_factory=list)

    @property
    def remaining(self) -> int:
        """Files still without a current summary after this pass."""
        return self.todo - self.made

    def summary(self) -> str:
        """One line for the log."""
        text = (f"summaries ({self.model}): {self.made} made, {self.remaining} remaining, "
                f"{self.failed} failed, {self.dropped} dropped in {self.seconds:.1f} s")
        if self.timed_out:
            text += " (stopped at AI_SUMMARY_SECONDS; the next run goes on)"
        return text


def summary_model(settings) -> str:
    """The model name summaries are stored under for these settings: ``extractive``, or
    ``backend/model`` of the generation model when ``AI_SUMMARIES=model``."""
    if settings.ai_summaries == "model":
        return f"{settings.ai_gen_backend}/{settings.ai_gen_model.strip()}"
    return EXTRACTIVE_MODEL


def make_summariser(settings) -> Summariser:
    """The summariser ``AI_SUMMARIES`` names; for ``model`` a refine pass through the chat
    client (``varaverk.summaries.refine``; nothing is contacted until the first file)."""
    if settings.ai_summaries != "model":
        return extractive_summary
    from varaverk.answering.generation.chat_client import make_chat_client
    from varaverk.ledger.recording import recording_work
    from varaverk.summaries.refine import model_summary

    client = recording_work(make_chat_client(settings), settings, "summary", "ai-index")
    return lambda chunks: model_summary(chunks, client)


def summarise(settings, summariser: Summariser | None = None, *,
              progress: Progress | None = None, clock: Callable[[], float] = time.monotonic
              ) -> PassReport:
    """Run one summary pass over the index at ``settings.index_path``.

    Args:
        settings: ``Settings`` (``ai_summaries``, ``ai_summary_seconds``, the generation model).
        summariser: chunks -> text; None for ``make_summariser(settings)``.
        progress: called after each file with ``(done, total, path)``.
        clock: seconds, monotonic (tests pass their own).

    Raises:
        IndexMissing: no index yet. LockBusy: another pass holds the summaries lock, or an
            index run holds the index lock past ``AI_INDEX_LOCK_TIMEOUT``.
        GenerationUnavailable: no model server reachable (what was made is kept).
    """
    path = Path(settings.index_path)
    if not path.is_file():
        raise IndexMissing(f"no index yet at {path} — run ai-index first")
    started = clock()
    report = PassReport(model=summary_model(settings))
    summariser = summariser or make_summariser(settings)
    lock_name = Path(str(path) + ".summaries")
    with index_lock(lock_name, settings.ai_index_lock_timeout), Index.open(path) as idx:
        with _writing(settings):
            report.dropped = idx.drop_orphan_summaries()
        todo = idx.summary_todo(report.model)
        report.todo = len(todo)
        for done, (file_path, sha) in enumerate(todo):
            if _out_of_time(settings, started, clock):
                report.timed_out = True
                break
            _summarise_one(idx, summariser, file_path, sha, report, settings)
            if progress is not None:
                progress(done + 1, len(todo), file_path)
    report.seconds = clock() - started
    return report


def _out_of_time(settings, started: float, clock: Callable[[], float]) -> bool:
    bound = settings.ai_summary_seconds
    return bool(bound) and clock() - started >= bound


def _writing(settings):
    """The index lock, held for one write of the pass (see the module doc)."""
    return index_lock(settings.index_path, settings.ai_index_lock_timeout)


def _summarise_one(idx: Index, summariser: Summariser, path: str, sha: str,
                   report: PassReport, settings) -> None:
    """Make and store one file's summary; a model failure on it is counted and logged."""
    from varaverk.answering.generation.events import GenerationError, GenerationUnavailable

    try:
        text = summariser(idx.chunks_for_path(path))
    except GenerationUnavailable:
        raise
    except GenerationError as exc:
        report.failed += 1
        report.failures.append((path, str(exc)))
        log.warning("no summary of %s: %s (retried next run)", path, exc)
        return
    if not text:
        return
    with _writing(settings):
        idx.put_summary(Summary(path, sha, report.model, _now(), text))
    report.made += 1


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def summary_status(settings) -> dict[str, Any]:
    """``{"mode", "model", "files", "current", "stale", "missing", "orphaned"}`` for
    ``ai-index --status`` (read-only; raises IndexMissing when there is no index)."""
    with Index.open(settings.index_path, readonly=True) as idx:
        counts = idx.summary_counts(summary_model(settings))
    return {"mode": settings.ai_summaries, "model": summary_model(settings), **counts}
