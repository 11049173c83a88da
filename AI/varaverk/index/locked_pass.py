"""The locked pass of a refresh (``varaverk.index.refresh``): under the index lock, compare
again, read, hash, chunk, embed and write in one transaction (the steps 3 and 4 of that
module's description), batch by batch (``AI_INDEX_BATCH`` chunks): each batch is embedded and
written into the open transaction as soon as it is read, so the memory a run holds is bounded
by a batch and the largest document, not by the repository; the commit comes at the end.

Imported by ``refresh`` only when the optimistic pass found work: it pulls in the chunkers,
the embedder and numpy, which a no-op run never needs.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ContextManager

from varaverk.documents import tracked_files
from varaverk.index.batched_embedding import EmbedProgress, embed_all, reusable_vectors
from varaverk.index.change_detection import (configured_embedder, racy, racy_since, skip_stat,
                                             skip_unchanged, stat_unchanged)
from varaverk.index.classify import (VERDICTS_META, Entry, Listed, head_key, heads_moved,
                                     list_all)
from varaverk.index.prepare import LinkTitles, guarded_decode_and_chunk, read_document, sha256
from varaverk.index.progress_file import ProgressFile
from varaverk.index.report import IndexReport
from varaverk.index.secret_masks import EXAMPLE, masked_note
from varaverk.index.store.compatibility import (CHUNK_CONTEXT_META, check_chunk_context,
                                                check_compatible, chunk_context,
                                                names_other_embedder)
from varaverk.index.store.health import file_damage
from varaverk.index.store.index import Index
from varaverk.index.store.location import discard_unwritten, move_aside
from varaverk.index.store.records import (UNKNOWN_STAT, FileState, IndexChanges, file_row,
                                          stat_key)
from varaverk.locking import index_lock
from varaverk.logs import DETAIL
from varaverk.named_sources import DEFAULT_SOURCE

if TYPE_CHECKING:  # pragma: no cover
    from varaverk.index.store.writes import Transaction

log = logging.getLogger(__name__)


def run_locked(settings, embedder: Any, force: bool, progress: Any,
               lock: Callable[[], ContextManager] | None, report: IndexReport,
               matcher: tracked_files.KindMatcher, stamp: str, started: float,
               seen=None) -> None:
    """Take the lock (``lock``, else the index lock) and bring the index in step, filling
    ``report``; the arguments as ``refresh`` takes them, ``stamp`` the chunkers' stamp,
    ``started`` the run's ``time.monotonic()`` start and ``seen`` what the optimistic pass
    read (``varaverk.index.refresh.Seen``; None: nothing), whose listing is used again when
    no run wrote the index since (its ``generation`` is the same): the sources are listed
    and stat'ed once."""
    factory = _embedder_factory(settings, embedder)
    with (lock() if lock is not None else _default_lock(settings)):
        report.locked = True
        if force:
            report.moved_aside = _set_aside_if_damaged(Path(settings.index_path))
        path = Path(settings.index_path)
        fresh = not path.exists()
        try:
            with Index.open(path) as idx, ProgressFile(path) as progress_file:
                run = _Run(settings, idx, None, factory, force, progress, report, started,
                           progress_file=progress_file,
                           states={} if force else idx.file_states(), meta=idx.meta(),
                           stamp=stamp, changes=IndexChanges(replace_all=force))
                if seen is not None and not force and \
                        seen.meta.get("generation") == run.meta.get("generation"):
                    run.listing, run.entries = seen.listing, seen.entries
                else:  # --force (no states) decides every kind afresh.
                    run.listing, run.entries = list_all(settings, matcher,
                                                        None if force else run.states, run.meta)
                run.links = LinkTitles(run.entries, run.listing.root)
                _refresh_locked(run)
        finally:
            # A first build that wrote nothing (failed, or interrupted) leaves no index.
            if fresh and not report.wrote:
                discard_unwritten(path)


def _set_aside_if_damaged(path: Path) -> str:
    """Before a forced rebuild: move a damaged index file aside (``move_aside``, never
    deleted) and say where; "" when the file is sound or absent."""
    if not path.is_file():
        return ""
    finding = file_damage(str(path))
    if finding is None:
        return ""
    moved = move_aside(path)
    log.warning("the index %s is damaged (%s): moved the damaged index aside to %s; "
                "rebuilding", path, finding, moved)
    return str(moved)


def _default_lock(settings) -> ContextManager:
    return index_lock(settings.index_path, settings.ai_index_lock_timeout)


def _embedder_factory(settings, embedder: Any) -> Callable[[], Any]:
    """A zero-argument callable giving the run's one embedder, made on first call."""
    cache: list[Any] = []

    def get():
        if not cache:
            if embedder is None:
                from varaverk.embedding import make_embedder  # heavy: numpy, onnxruntime
                cache.append(make_embedder(settings))
            elif callable(embedder) and not hasattr(embedder, "embed"):
                cache.append(embedder())
            else:
                cache.append(embedder)
        return cache[0]
    return get


@dataclass
class _Pending:
    """A read and chunked document waiting for its vectors (its future file row)."""

    path: str
    kind: str
    stat: tuple  # stat_key of the file as read
    sha256: str
    encoding: str
    chunks: list  # list[Chunk]
    note: str = ""  # kept as the file row's reason: values masked as secrets
    source: str = DEFAULT_SOURCE


@dataclass
class _Run:
    """One locked refresh: what it reads, what it will write, and its report.

    ``states``/``meta`` are the stored rows and meta read under the lock; ``stamp`` the
    chunkers' stamp (``chunker_stamp``); ``rechunk`` is set when the chunkers changed since the
    last run (every document is re-read and re-chunked).
    """

    settings: Any
    idx: Index
    listing: Listed | None
    get_embedder: Callable[[], Any]
    force: bool
    progress: Any
    report: IndexReport
    started: float
    states: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    stamp: str = ""
    rechunk: bool = False
    changes: IndexChanges = field(default_factory=IndexChanges)
    pending: list = field(default_factory=list)  # list[_Pending]
    entries: list = field(default_factory=list)  # list[Entry], every source's
    links: LinkTitles | None = None              # the notes sources' link titles
    progress_file: ProgressFile | None = None    # what the dock shows of this run
    embedding: EmbedProgress | None = None       # the embedding progress, across batches
    open_write: Callable[[], Transaction] | None = None  # opens the run's one transaction
    tx: Transaction | None = None                # that transaction once a batch was written
    pending_chunks: int = 0                      # chunks in ``pending``
    stored_chunks: int = 0                       # chunks written so far (reused or embedded)
    embed_seconds: float = 0.0
    write_seconds: float = 0.0


def _refresh_locked(run: _Run) -> None:
    """The locked pass: compare, read, chunk, embed and write, in that order (see module doc),
    batch by batch: every ``AI_INDEX_BATCH`` chunks read are embedded and written at once into
    the run's one transaction (committed at the end, rolled back on any error), so the memory
    the run holds is bounded by a batch, not the repository."""
    listing, entries, report, started = run.listing, run.entries, run.report, run.started
    _load_stored(run)
    report.tracked = len(listing.entries)
    report.head = listing.head
    report.documents = sum(1 for e in entries if e.kind)
    run.embedding = EmbedProgress(
        run.progress, on_step=run.progress_file.update if run.progress_file else None)
    with contextlib.ExitStack() as stack:
        stack.callback(run.embedding.close)
        run.open_write = lambda: stack.enter_context(run.idx.writing(run.force))
        for entry in entries:
            _scan_entry(run, entry)
            if run.pending_chunks >= run.settings.ai_index_batch:
                _write_batch(run)
        _record_deletions(run, entries)
        report.timings["prepare"] = (time.monotonic() - started - run.embed_seconds
                                     - run.write_seconds)
        if run.pending:
            _embed_pending(run)
        elif run.force:
            emb = run.get_embedder()
            run.changes.embedder = (emb.backend, emb.model, None)
        _count_chunks(run)
        if run.tx is None and not _has_changes(run):
            report.seconds = time.monotonic() - started
            return  # another run did the work while we waited for the lock
        if run.progress_file:
            run.progress_file.set_phase("writing")
        _write(run)
    report.seconds = time.monotonic() - started  # committed (the block ended without error)
    report.wrote = True


def _write_batch(run: _Run) -> None:
    """Embed the pending documents and write them, with the rows recorded so far, into the
    run's transaction (opened by the first batch); the run then holds none of them."""
    _embed_pending(run)
    started = time.monotonic()
    if run.tx is None:
        run.tx = run.open_write()
    run.tx.add(run.changes)
    changes = run.changes
    changes.new_chunks, changes.file_rows, changes.replace_chunks_of = [], [], []
    run.write_seconds += time.monotonic() - started


def _count_chunks(run: _Run) -> None:
    """The report's chunk counts once everything is embedded."""
    run.report.chunks_embedded = run.stored_chunks - run.report.chunks_reused
    run.report.chunks_failed = len(run.report.failures)
    run.report.timings["embed"] = run.embed_seconds


def _load_stored(run: _Run) -> None:
    """Judge the stored rows and meta (read with the listing); refuse another embedder
    before any work."""
    # New chunking rules: re-chunk every document (unchanged chunk texts keep their vectors).
    run.rechunk = bool(run.states) and run.meta.get("chunker") != run.stamp
    if run.rechunk:
        log.info("the chunkers changed since the last run: every document is re-chunked")
    if not run.force and names_other_embedder(run.meta, *configured_embedder(run.settings)):
        emb = run.get_embedder()  # the settings changed: refuse another model before any work
        check_compatible(run.meta, emb.backend, emb.model)
    if not run.force:
        check_chunk_context(run.meta, chunk_context(run.settings))


def _scan_entry(run: _Run, entry: Entry) -> None:
    """Decide one tracked path: skipped, unchanged by stat, unchanged by hash, or pending."""
    stored = run.states.get(entry.path)
    if entry.reason:
        _record_skip(run, entry, stored)
        return
    if not run.rechunk and stat_unchanged(entry, stored) \
            and not racy(stored, racy_since(run.meta)):
        if stored.status == "skipped":
            run.report.skipped.append((entry.path, stored.reason))
        else:
            run.report.unchanged += 1
        return
    data, reason = read_document(run.listing.root, entry)
    if data is None:
        run.report.skipped.append((entry.path, reason))
        run.changes.replace_chunks_of.append(entry.path)
        run.changes.file_rows.append(file_row(entry.path, entry.kind, UNKNOWN_STAT, "",
                                              "skipped", reason, source=entry.source))
        return
    run.report.files_read += 1
    sha = sha256(data)
    if not run.rechunk and stored is not None and stored.sha256 == sha \
            and stored.status != "partial" and stored.kind == entry.kind:
        _record_same_content(run, entry, stored, sha)
        return
    _chunk_entry(run, entry, data, sha)


def _record_skip(run: _Run, entry: Entry, stored: FileState | None) -> None:
    """A path skipped before any read (not a doc, submodule, symlink...)."""
    run.report.skipped.append((entry.path, entry.reason))
    if skip_unchanged(entry, stored):
        return
    # Logged when a path's state changes (so the first run logs every skip); --status lists
    # them all, every time.
    suffix = "; its chunks are removed" if stored and stored.chunk_count else ""
    log.info("%s: skipped: %s%s", entry.path, entry.reason, suffix, extra=DETAIL)
    run.changes.replace_chunks_of.append(entry.path)
    run.changes.file_rows.append(file_row(entry.path, entry.kind, skip_stat(entry), "",
                                          "skipped", entry.reason, source=entry.source))


def _record_same_content(run: _Run, entry: Entry, stored: FileState, sha: str) -> None:
    """Same content under a new mtime: record the new stat, keep chunks and vectors."""
    if stored.status == "skipped":
        run.report.skipped.append((entry.path, stored.reason))
    else:
        run.report.rehashed += 1
    run.changes.file_rows.append(file_row(entry.path, entry.kind, stat_key(entry.st), sha,
                                          stored.status, stored.reason, stored.chunk_count,
                                          stored.encoding, entry.source))


def _chunk_entry(run: _Run, entry: Entry, data: bytes, sha: str) -> None:
    """Decode and chunk a new or changed document; queue it for embedding or record a skip."""
    emb = run.get_embedder()
    decoded, chunks, reason, failure = guarded_decode_and_chunk(
        entry, data, emb.count_tokens, emb.max_tokens, run.links.getter(entry),
        run.settings.ai_contextual_chunks)
    st, stored = entry.st, run.states.get(entry.path)
    if failure:  # skipped with its reason; its previous chunks stay until it reads cleanly
        run.report.skipped.append((entry.path, failure))
        run.changes.file_rows.append(file_row(
            entry.path, entry.kind, stat_key(st), sha, "skipped", failure,
            stored.chunk_count if stored else 0, stored.encoding if stored else "",
            entry.source))
        return
    if reason:
        if decoded.text is not None:
            log.info("%s: skipped: %s", entry.path, reason, extra=DETAIL)
        _skip_read(run.changes, run.report, entry, st, sha, reason, decoded.encoding)
        return
    run.report.masked += len(decoded.masked)
    run.report.examples += sum(what.startswith(EXAMPLE) for _, what in decoded.masked)
    run.pending.append(_Pending(entry.path, entry.kind, stat_key(st), sha,
                                decoded.encoding, chunks,
                                masked_note(decoded.masked) if decoded.masked else "",
                                entry.source))
    run.pending_chunks += len(chunks)


def _skip_read(changes: IndexChanges, report: IndexReport, entry: Entry, st, sha: str,
               reason: str, encoding: str) -> None:
    """Record a document that was read but yields nothing (binary, no header, empty)."""
    report.skipped.append((entry.path, reason))
    changes.replace_chunks_of.append(entry.path)
    changes.file_rows.append(file_row(entry.path, entry.kind, stat_key(st), sha, "skipped",
                                      reason, 0, encoding, entry.source))


def _record_deletions(run: _Run, entries: list[Entry]) -> None:
    """Stored paths no longer tracked lose their rows and chunks (deletions, renames)."""
    current = {e.path for e in entries}
    run.report.deleted = sorted(p for p in run.states if p not in current)
    run.changes.delete_paths = list(run.report.deleted)
    for path in run.report.deleted:
        log.info("%s: no longer tracked; its chunks are removed", path)


def _embed_pending(run: _Run) -> None:
    """Embed the pending documents' chunks (reusing stored vectors) and record their rows and
    chunks in ``run.changes``; ``run.pending`` is then empty."""
    report, changes = run.report, run.changes
    emb = run.get_embedder()
    expect = None if run.force else run.meta
    if expect is not None:
        check_compatible(expect, emb.backend, emb.model)  # refused before any embedding
    reused = {} if run.force else reusable_vectors(run.idx, run.pending)
    report.chunks_reused += len(reused)
    embed_started = time.monotonic()
    vectors, failures = embed_all(
        emb, [c for p in run.pending for c in p.chunks if id(c) not in reused], run.embedding,
        report, expect)
    vectors.update(reused)
    run.embed_seconds += time.monotonic() - embed_started
    for item in run.pending:
        _record_embedded(run, item, vectors, failures)
    run.pending, run.pending_chunks = [], 0
    if changes.new_chunks:
        # The dimension is read off the vectors when they are written (no probe request).
        changes.embedder = (emb.backend, emb.model, None)


def _record_embedded(run: _Run, item: _Pending, vectors: dict, failures: dict) -> None:
    """One embedded document's chunks and file row (``partial`` when some chunks failed)."""
    stored_chunks, failed = [], []
    for chunk in item.chunks:
        pieces = vectors.get(id(chunk))
        if pieces:
            stored_chunks.extend(pieces)
        if id(chunk) in failures:
            failed.append(failures[id(chunk)])
    run.changes.replace_chunks_of.append(item.path)
    run.changes.new_chunks.extend(stored_chunks)
    run.stored_chunks += len(stored_chunks)
    if failed:
        reason = (f"{len(failed)} of {len(item.chunks)} chunks failed to embed "
                  f"(retried next run): {failed[0]}")
        log.warning("%s: %s", item.path, reason)
        run.report.failures.extend((item.path, msg) for msg in failed)
        # size -1: the next run re-reads and re-embeds this file.
        run.changes.file_rows.append(file_row(item.path, item.kind, UNKNOWN_STAT, "",
                                              "partial", reason, len(stored_chunks),
                                              item.encoding, item.source))
    else:
        run.report.indexed += 1
        run.changes.file_rows.append(file_row(item.path, item.kind, item.stat, item.sha256,
                                              "indexed", item.note, len(stored_chunks),
                                              item.encoding, item.source))


def _has_changes(run: _Run) -> bool:
    """Whether the locked pass has anything to write (rows, chunks, HEAD or settings moved)."""
    changes = run.changes
    return bool(changes.file_rows or changes.delete_paths or changes.new_chunks or run.force
                or "generation" not in run.meta  # never written: a first build always writes
                or heads_moved(run.listing, run.meta)
                or run.meta.get(VERDICTS_META) != run.listing.glob_verdicts
                or names_other_embedder(run.meta, *configured_embedder(run.settings)))


def _write(run: _Run) -> None:
    """Write everything in one transaction, with the run's meta."""
    report = run.report
    report.seconds = time.monotonic() - run.started
    run.changes.configured = configured_embedder(run.settings)
    # Every stat of this run came after its start: the racy rule's reference (wall clock).
    scan_started_ns = time.time_ns() - int((time.monotonic() - run.started) * 1e9)
    run.changes.meta.update(
        scan_started_ns=str(scan_started_ns),
        head=run.listing.head or "", repo_root=str(run.listing.root), built_at=_now(),
        chunker=run.stamp, last_run="force" if run.force else "incremental")
    run.changes.meta[CHUNK_CONTEXT_META] = chunk_context(run.settings)
    run.changes.meta[VERDICTS_META] = run.listing.glob_verdicts
    for name, head in run.listing.heads.items():
        if name != DEFAULT_SOURCE:
            run.changes.meta[head_key(name)] = head
            run.changes.meta[f"root:{name}"] = run.listing.roots[name]
    if run.changes.new_chunks or run.force:
        run.changes.meta["build_seconds"] = f"{report.seconds:.3f}"
    write_started = time.monotonic()
    if run.tx is None:
        run.tx = run.open_write()
    run.tx.finish(run.changes)  # committed when ``_refresh_locked``'s block ends
    report.timings["write"] = run.write_seconds + time.monotonic() - write_started


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
