"""``refresh``: bring the index in step with the repository's tracked documentation.

1. List every source's tracked paths and HEAD, and classify them
   (``varaverk.index.classify``).
2. Compare each with its stored row by ``lstat`` only (``varaverk.index.change_detection``,
   with git's racy-file rule). If nothing moved, no HEAD moved and the settings name the same
   embedder, the run ends here: no lock, no write, no embedder, no numpy.
3. Otherwise (``varaverk.index.locked_pass``, imported only then) take the index lock
   (``varaverk.locking``) and redo the comparison under it. A changed file is read and
   hashed; an unchanged hash costs only a metadata update. A new or changed document is
   decoded, masked and chunked (``varaverk.index.prepare``) and embedded in batches
   (``varaverk.index.batched_embedding``: a chunk the server finds too long is halved and
   retried; any other failed chunk is recorded against its file, status ``partial``, retried
   next run) and the run goes on. Paths stored but no longer tracked lose their rows
   and chunks (deletions and renames).
4. Everything is written in one SQLite transaction (``Index.writing``), committed at the end:
   every ``AI_INDEX_BATCH`` chunks read are embedded and written into it at once, so a run
   holds a batch, not the repository, in memory; a failed or interrupted run (server gone,
   Ctrl-C, crash) leaves the previous index whole and usable.

An index built with another embedding backend, model or dimension is refused with
``IndexMismatch`` before any embedding; ``force=True`` rebuilds everything in one
transaction instead.

Heavy modules (numpy, the chunkers, the embedder, tqdm, filelock, wcmatch) are imported only
once there is work to do, and the globs' verdicts stand while the globs are the same, so the
no-op refresh compiles no glob and costs little more than ``git ls-files`` and a stat per file
(``tests/benchmarks/bench_refresh.py`` measures that ratio and names any heavy module a no-op
run imported).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, ContextManager, NamedTuple

from varaverk.documents import tracked_files
from varaverk.documents.stamp import chunker_stamp
from varaverk.index import fingerprint
from varaverk.index.change_detection import needs_work
from varaverk.index.classify import Entry, Listed, list_all
from varaverk.index.report import IndexReport
from varaverk.index.store.errors import IndexCorrupt, IndexMissing
from varaverk.index.store.index import Index

EmbedderLike = Any  # varaverk.embedding.Embedder, or a zero-argument factory returning one


def refresh(settings, embedder: EmbedderLike = None, *, force: bool = False,
            progress: Any = None, lock: Callable[[], ContextManager] | None = None,
            inputs=None) -> IndexReport:
    """Bring the index at ``settings.index_path`` in step with the repository.

    Args:
        settings: ``varaverk.config.Settings`` (repo root, globs, data dir, lock timeout).
        embedder: an ``Embedder``, a zero-argument callable returning one (called only when
            something must be embedded or checked), or None for
            ``varaverk.embedding.make_embedder(settings)``, likewise lazily.
        force: rebuild every document from scratch (another model is then allowed).
        progress: None shows a tqdm bar when stderr is a terminal; False shows none; a callable
            ``progress(done, total)`` is called after each embedding request (``total``: the
            chunks queued so far; it grows batch by batch and equals ``done`` at the end).
        lock: a zero-argument callable returning the context manager that guards writing;
            None takes the index lock (``varaverk.locking.index_lock``). It is entered only when
            there is something to write.
        inputs: what ``settings`` were loaded from (``varaverk.config_inputs.Inputs``), when a
            command loaded them: a run that finds nothing to do records them for the next
            one's shortcut (``varaverk.index.fingerprint``). None records nothing.

    Returns:
        An ``IndexReport``.

    A damaged index file is moved aside by ``force`` (``_set_aside_if_damaged``), else
    refused with ``IndexDamaged``. A first build that fails leaves no index file behind.

    Raises:
        IndexMismatch: the index holds vectors of another backend/model/dimension (not force).
        IndexDamaged: the index file is damaged (not force).
        LockBusy: another run held the lock past ``AI_INDEX_LOCK_TIMEOUT``.
        EmbeddingUnavailable: no embedding server reachable (nothing written).
        SourcesError: the repository cannot be listed.
    """
    started, started_ns = time.monotonic(), time.time_ns()
    report = IndexReport(force=force)
    matcher = tracked_files.KindMatcher.from_settings(settings)  # compiled only if a kind is needed
    stamp = chunker_stamp()
    seen = None if force else _optimistic_pass(settings, matcher)
    if seen is not None and not needs_work(settings, seen.listing, seen.entries, seen.states,
                                           seen.meta, stamp):
        _report_up_to_date(report, seen, started)
        _record_fingerprint(settings, inputs, seen, report, started_ns)
        return report
    # The locked pass and what it needs (chunkers, embedder, numpy...) load only now.
    from varaverk.index.locked_pass import run_locked

    run_locked(settings, embedder, force, progress, lock, report, matcher, stamp, started, seen)
    return report


class Seen(NamedTuple):
    """What the optimistic pass read: the stored rows and meta, and every source's listing
    classified against them. The locked pass reuses the listing while the index's
    ``generation`` is the same (no run wrote in between)."""

    states: dict
    meta: dict
    listing: Listed
    entries: list[Entry]


def _optimistic_pass(settings, matcher: tracked_files.KindMatcher) -> Seen | None:
    """Read the index and list the sources, without the lock: most runs (cron, after a pull)
    find nothing to do. None when there is no index yet, or none this pass can read."""
    index_path = Path(settings.index_path)
    if not index_path.is_file():
        return None
    try:
        with Index.open(index_path, readonly=True) as idx:
            states, meta = idx.file_states(), idx.meta()
    except (IndexCorrupt, IndexMissing):
        # An older schema (the locked pass migrates or explains), or a file another run
        # has just created and not yet filled: the locked pass sorts both out.
        return None
    listing, entries = list_all(settings, matcher, states, meta)
    return Seen(states, meta, listing, entries)


def _report_up_to_date(report: IndexReport, seen: Seen, started: float) -> None:
    """Fill ``report`` for a run that found nothing to do."""
    _fill_counts(report, seen.listing, seen.entries, seen.states)
    report.unchanged = sum(1 for e in seen.entries if not e.reason
                           and getattr(seen.states.get(e.path), "status", "") != "skipped")
    report.seconds = time.monotonic() - started


def _record_fingerprint(settings, inputs, seen: Seen, report: IndexReport,
                        started_ns: int) -> None:
    """Let the next run of the repository alone find "nothing to do" from its fingerprint
    (``varaverk.index.fingerprint``), without this module."""
    generation = seen.meta.get("generation")
    if inputs is not None and generation and report.tracked and len(seen.listing.specs) == 1:
        fingerprint.record(settings, inputs, seen.listing, generation, started_ns,
                           report.summary_head())


def _fill_counts(report: IndexReport, listing: Listed, entries: list[Entry],
                 states: dict) -> None:
    """The counts and skips of a run that found nothing to do."""
    report.tracked = len(listing.entries)
    report.head = listing.head
    report.documents = sum(1 for e in entries if e.kind)
    for e in entries:
        if e.reason:
            report.skipped.append((e.path, e.reason))
        else:
            stored = states.get(e.path)
            if stored is not None and stored.status == "skipped":
                report.skipped.append((e.path, stored.reason))
