"""Index runs: incremental refresh, full rebuild, dry-run plan and status.

``refresh`` keeps the SQLite index in step with the repository's tracked documentation:

1. List tracked paths (``varaverk.documents.tracked``: ``git ls-files -z -s``) and HEAD.
2. Compare each with its stored row by ``lstat`` only: a file whose size and mtime_ns have not
   moved is skipped without being read, unless it is racy (git's rule: its mtime is not older
   than the start of the run that stored it), which is hashed. If nothing moved, HEAD is the same and the embedding
   settings are the same, the run ends here: no lock, no write, no embedder, no numpy.
3. Otherwise take the index lock (``varaverk.locking``) and redo the comparison under it.
   A changed file is read and hashed; an unchanged hash costs only a metadata update. A new or
   changed document is decoded, chunked (``varaverk.documents.chunking.chunk_document``) and embedded in
   batches; a chunk the server rejects as too long is halved (``split_chunk``) and retried, up
   to ``MAX_SPLIT_DEPTH`` times; any other failed chunk is recorded against its file (status
   ``partial``, retried next run) and the run goes on. Paths stored but no longer tracked lose
   their rows and chunks (deletions and renames).
4. Everything is written by ``Index.write`` in one SQLite transaction at the end, so a failed
   or interrupted run (server gone, Ctrl-C, crash) leaves the previous index whole and usable.

An index built with another embedding backend, model or dimension is refused with
``IndexMismatch`` before any embedding; ``force=True`` rebuilds everything in one
transaction instead.

Heavy modules (numpy, the chunkers, the embedder, tqdm, filelock, wcmatch) are imported only
once there is work to do, and the globs' verdicts stand while the globs are the same
(``_kind``), so the no-op refresh compiles no glob and costs little more than
``git ls-files`` and a stat per file
(``tests/benchmarks/bench_refresh.py`` measures that ratio, target at most 1.25, and names any
heavy module a no-op run imported).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, ContextManager, NamedTuple

from varaverk.documents import tracked as sources
from varaverk.logs import DETAIL
from varaverk.named_sources import (DEFAULT_SOURCE, NOTE_KINDS, SourceSpec, all_sources)
from varaverk.index.store import (FileRow, FileState, Index, IndexChanges, IndexCorrupt, IndexMissing,
                                  check_compatible, names_other_embedder, vector_problem)

log = logging.getLogger(__name__)

MAX_SPLIT_DEPTH = 4          # a too-long chunk is halved at most this many times (16 pieces)
PROGRESS_BATCH_FACTOR = 2    # texts per embed() call: batch size times this (progress steps)
REASON_NO_HEADER = "no six-section header comment"
REASON_NO_TEXT = "no text to index"


@dataclass
class IndexReport:
    """What one ``refresh`` did. Counts are files unless named chunks.

    Attributes:
        tracked: paths ``git ls-files`` listed. documents: of those, of a documentation kind.
        indexed: documents read, chunked and embedded this run.
        unchanged: documents skipped because size and mtime_ns had not moved (not read).
        rehashed: documents read because their mtime moved, found identical by hash (not
            re-embedded).
        skipped: ``[(path, reason)]`` for tracked paths not indexed (all of them, every run).
        deleted: paths removed from the index (no longer tracked).
        files_read: files opened this run. chunks_embedded: vectors computed this run.
        chunks_reused: chunks of changed files whose text (with context) was already in the
            index, so their stored vector was kept instead of being computed again.
        chunks_failed: chunks that got no vector; failures: ``[(path, message)]`` for them.
        masked: values masked as secrets in the documents chunked this run (indexed lines
            only); examples: how many of them were documentation examples.
        embed_calls: ``Embedder.embed`` calls made. head: HEAD's SHA (None: no commits).
        wrote: whether the index was written. locked: whether the lock was taken.
        force: a full rebuild. seconds: wall time of the run.
        timings: seconds per phase of a run that had work: ``prepare`` (list, stat, read,
            decode, chunk), ``embed``, ``write`` (the one transaction).
    """

    tracked: int = 0
    documents: int = 0
    indexed: int = 0
    unchanged: int = 0
    rehashed: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    files_read: int = 0
    chunks_embedded: int = 0
    chunks_reused: int = 0
    chunks_failed: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    masked: int = 0
    examples: int = 0
    embed_calls: int = 0
    head: str | None = None
    wrote: bool = False
    locked: bool = False
    force: bool = False
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the report."""
        return asdict(self)

    def summary(self) -> str:
        """One line for the log: what changed and how long it took."""
        if not self.tracked:
            return "no tracked files: the repository is empty, nothing to index"
        reasons = Counter(reason for _, reason in self.skipped)
        skipped = f"{len(self.skipped)} skipped"
        if reasons:
            skipped += " (" + ", ".join(f"{n} {r}" for r, n in reasons.most_common()) + ")"
        parts = [f"{self.tracked} tracked files: {self.indexed} indexed",
                 f"{self.unchanged + self.rehashed} unchanged", skipped,
                 f"{len(self.deleted)} deleted", f"{self.chunks_embedded} chunks embedded"]
        if self.chunks_reused:
            parts.append(f"{self.chunks_reused} unchanged chunks reused")
        if self.chunks_failed:
            parts.append(f"{self.chunks_failed} chunks failed")
        if self.masked:
            parts.append(f"{self.masked} values masked ({self.examples} documentation examples)")
        verb = "rebuilt" if self.force else "refreshed" if self.wrote else "up to date"
        return f"index {verb}: " + ", ".join(parts) + f" in {self.seconds:.2f} s"


# ---------------------------------------------------------------------------------------------
# Classifying tracked paths (shared by refresh, plan and status)
# ---------------------------------------------------------------------------------------------

class _Entry(NamedTuple):
    path: str            # storable path (printable when the name is not valid UTF-8)
    kind: str            # "" when not a documentation kind
    reason: str          # skip reason; "" for a readable document
    st: os.stat_result | None
    source: str = DEFAULT_SOURCE   # the named source it was listed in
    rel: str = ""                  # the path inside that source ("": same as ``path``)
    root: Path | None = None       # that source's work tree (None: the repository's)


class _Listed(NamedTuple):
    """Every source's ``git ls-files``, as one listing.

    ``root``/``head`` are the default source's (the repository), ``entries`` every source's
    tracked paths (for counts), ``heads`` each source's HEAD by name, ``specs`` the sources,
    ``glob_verdicts`` the globs' verdicts to record (meta ``VERDICTS_META``, see ``_kind``).
    """

    root: Path
    head: str | None
    entries: list
    heads: dict[str, str]
    roots: dict[str, str]
    specs: list[SourceSpec]
    glob_verdicts: str


def _head_key(name: str) -> str:
    """The meta key of a source's HEAD (``head`` for the repository, as before sources)."""
    return "head" if name == DEFAULT_SOURCE else f"head:{name}"


def _heads_moved(listed: _Listed, meta: dict) -> bool:
    return any(head != meta.get(_head_key(name), "") for name, head in listed.heads.items())


# The meta entry keeping, beside the fingerprint of the globs (``_globs_fingerprint``), the
# globs' verdicts on the script candidates (``_kind``): ``repr((fingerprint, {path: (kind,
# excluded)}))``.
VERDICTS_META = "glob_verdicts"


def _globs_fingerprint(settings, specs: list[SourceSpec]) -> str:
    """The ``AI_GLOBS_*`` settings, the sources' names and types, and the code that applies
    them (``sources.classifier_stamp``): while these are the same, so is every glob verdict."""
    globs = {kind: tuple(getattr(settings, f"ai_globs_{kind}")) for kind in sources.KINDS}
    return repr((sources.classifier_stamp(), globs, tuple(settings.ai_globs_exclude),
                 [(spec.name, spec.type) for spec in specs]))


def _known_verdicts(meta: dict | None, fingerprint: str) -> dict | None:
    """The recorded verdicts when they were made under ``fingerprint``, else None."""
    recorded = (meta or {}).get(VERDICTS_META)
    if not recorded:
        return None
    import ast  # already loaded by dataclasses; json would be one more import

    try:
        made_under, verdicts = ast.literal_eval(recorded)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if made_under != fingerprint or not isinstance(verdicts, dict) or not all(
            isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str)
            for v in verdicts.values()):
        return None
    return verdicts


def _list_all(settings, matcher: sources.KindMatcher, states: dict | None = None,
              meta: dict | None = None) -> tuple[_Listed, list[_Entry]]:
    """List and classify every source (the repository first, then ``AI_SOURCES``);
    ``states`` (the stored file rows) as ``_classify`` takes them; ``meta``: the stored meta,
    whose recorded glob verdicts (``_kind``) spare a no-op run compiling any glob.

    Raises SourcesError when one cannot be listed (nothing is written then, so a source
    that is briefly unmounted never loses its chunks).
    """
    specs = all_sources(settings)
    fingerprint = _globs_fingerprint(settings, specs)
    known = _known_verdicts(meta, fingerprint) if states is not None else None
    verdicts: dict[str, tuple[str, bool]] = {}
    entries: list[_Entry] = []
    tracked: list = []
    heads, roots = {}, {}
    repo = None
    for spec in specs:
        listing = sources.list_tracked(spec.root)
        repo = repo or listing
        tracked.extend(listing.entries)
        heads[spec.name], roots[spec.name] = listing.head or "", str(listing.root)
        entries.extend(_classify(listing, matcher, spec, states, (known, verdicts)))
    return _Listed(repo.root, repo.head, tracked, heads, roots, specs,
                   repr((fingerprint, dict(sorted(verdicts.items()))))), entries


def _classify(listing: sources.Listing, matcher: sources.KindMatcher,
              spec: SourceSpec, states: dict | None,
              verdicts: tuple[dict | None, dict]) -> list[_Entry]:
    """Kind and disk check of every tracked path of one source (the kind: ``_kind``)."""
    folders: dict[str, str] = {}  # each folder is checked for links once (lstat_entry)
    entries = []
    for tracked in listing.entries:
        extra = (spec.name, tracked.path, listing.root)
        if not sources.is_valid_name(tracked.path):
            entries.append(_Entry(spec.stored_path(sources.printable_name(tracked.path)), "",
                                  sources.REASON_BAD_NAME, None, *extra))
            continue
        path = spec.stored_path(tracked.path)
        kind, sniff_st = _kind(listing.root, tracked, spec, matcher,
                               states.get(path) if states else None, verdicts, folders)
        if tracked.mode == sources.GITLINK_MODE:  # a folder of another repository
            entries.append(_Entry(path, kind, sources.REASON_SUBMODULE, None, *extra))
            continue
        if not kind:
            entries.append(_Entry(path, "", sources.REASON_NOT_DOC, sniff_st, *extra))
            continue
        # A script known by its shebang was lstat-checked by the sniff (``_sniffed``).
        st, reason = (sniff_st, "") if sniff_st is not None else \
            sources.lstat_entry(listing.root, tracked, folders)
        entries.append(_Entry(path, kind, reason, st, *extra))
    return entries


def _kind(root: Path, tracked: sources.TrackedPath, spec: SourceSpec,
          matcher: sources.KindMatcher, stored: FileState | None,
          verdicts: tuple[dict | None, dict], folders: dict[str, str]
          ) -> tuple[str, os.stat_result | None]:
    """One tracked path's kind ("" for none) and the lstat of a sniffed script (``_sniffed``).

    A repository path's kind is its globs' verdict (``matcher``: kind, or excluded), else for
    a script candidate no glob names (``sources.could_be_script``) its shebang. ``verdicts``
    = ``(known, found)``: the globs' verdicts on script candidates recorded by the last run
    under the same globs (None: none or other globs), and the dict this run's go into. A path
    with a stored row needs no glob then: a candidate's verdict is known, and any other path's
    stored kind is its verdict (only candidates are sniffed). So a no-op run compiles none.
    """
    if spec.type != "repo":
        return spec.kind_of(tracked.path, matcher) or "", None
    known, found = verdicts
    path = spec.stored_path(tracked.path)
    candidate = sources.could_be_script(tracked)
    if known is not None and stored is not None and path in known:
        kind, excluded = known[path]
    elif known is not None and stored is not None and not candidate:
        kind, excluded = stored.kind, False  # never sniffed: as a glob left it
    else:
        kind, excluded = matcher.kind_of(tracked.path) or "", matcher.excluded(tracked.path)
    if candidate:
        found[path] = (kind, excluded)
    if kind or excluded or not candidate:
        return kind, None
    return _sniffed(root, tracked, stored, folders)


def _sniffed(root: Path, tracked: sources.TrackedPath, stored: FileState | None,
             folders: dict[str, str]) -> tuple[str, os.stat_result | None]:
    """``("header", st)`` for a script candidate (``sources.could_be_script``, decided by
    ``_kind``) known by its shebang only, else ``("", st)``; ``st`` is the path's lstat (None
    when it cannot be read).

    The verdict ``stored`` by the last run stands while the file's size and mtime do, so a
    no-op run opens no file; a changed file is sniffed again, as it may have gained or lost
    its shebang. ``--force`` (no stored states) sniffs every candidate.
    """
    st, reason = sources.lstat_entry(root, tracked, folders)
    if reason or st is None:
        return "", None
    if stored is not None and (stored.size, stored.mtime_ns) == (st.st_size, st.st_mtime_ns):
        return ("header" if stored.kind == "header" else ""), st
    return sources.shebang_kind(root, tracked, st) or "", st


# Git's racy-timestamp rule: a file whose stored mtime is not older than the start of the run
# that stored it may have been written again within the same clock tick, or had its mtime put
# back (touch -r, sync tools, a checkout), so its stat proves nothing and it is re-hashed. The
# slack covers file times coming from a coarse kernel clock, up to a tick behind ours.
RACY_SLACK_NS = 10_000_000


def _racy_since(meta: dict) -> int | None:
    """Stored mtimes at or after this (ns) are racy; None for an index built before the rule."""
    started = meta.get("scan_started_ns", "")
    return int(started) - RACY_SLACK_NS if started.isdigit() else None


def _racy(stored: FileState, since: int | None) -> bool:
    return since is not None and stored.mtime_ns >= since


def _same_bytes(root: Path, entry: _Entry, stored: FileState) -> bool:
    """A racy file's content still hashes to the stored sha256 (read, nothing written)."""
    data, _ = _read(root, entry)
    return data is not None and _sha256(data) == stored.sha256


def _stat_unchanged(entry: _Entry, stored: FileState | None) -> bool:
    """A readable document whose stored size, mtime_ns and kind match (no read needed unless
    it is racy: ``_racy``)."""
    if stored is None or entry.st is None:
        return False
    return (stored.status != "partial" and stored.kind == entry.kind
            and stored.size == entry.st.st_size and stored.mtime_ns == entry.st.st_mtime_ns)


def _skip_unchanged(entry: _Entry, stored: FileState | None) -> bool:
    """A path skipped before the read (not a doc, submodule, symlink...) stored as such; a
    sniffed script candidate (``entry.st`` set) also by size and mtime."""
    return stored is not None and stored.status == "skipped" and stored.reason == entry.reason \
        and stored.kind == entry.kind and _skip_stat(entry) == (stored.size, stored.mtime_ns)


def _skip_stat(entry: _Entry) -> tuple[int, int]:
    """The size and mtime a skip row stores: -1, -1 unless the path was sniffed (``_sniffed``)."""
    return (entry.st.st_size, entry.st.st_mtime_ns) if entry.st is not None else (-1, -1)


# secret_patterns: a change to what is masked must re-chunk every document.
CHUNKER_MODULES = tuple(f"documents/{m}" for m in (
    "chunking", "script_headers", "script_docs", "markdown_sections", "rst_sections",
    "conf_templates", "obsidian_notes", "org_notes", "note_links", "chat_exports")) + (
    "secret_patterns",)


def chunker_stamp() -> str:
    """A checksum of the chunkers' source code (CRC-32, hex).

    Stored in the index; when an upgrade changes the chunkers, the next refresh re-reads and
    re-chunks every document instead of trusting chunks made by the old rules. Chunks whose
    text comes out the same keep their vectors, so only what really changed is embedded.
    """
    import binascii

    folder = Path(__file__).parents[1]  # varaverk/, without importing the chunkers
    crc = 0
    for name in CHUNKER_MODULES:
        try:
            crc = binascii.crc32((folder / f"{name}.py").read_bytes(), crc)
        except OSError:  # a module missing from this installation
            crc = binascii.crc32(name.encode(), crc)
    return f"{crc:08x}"


def _read(root: Path, entry: _Entry) -> tuple[bytes | None, str]:
    """A document's bytes, or ``(None, reason)`` when it cannot be read (logged).

    ``root``: the repository; an entry of another source is read from its own work tree.
    """
    try:
        with sources.open_tracked(entry.root or root, entry.rel or entry.path, entry.st) as fh:
            return fh.read(), ""
    except OSError as exc:
        reason = f"{sources.REASON_UNREADABLE}: {exc.strerror or exc}"
        log.warning("%s: %s", entry.path, reason)
        return None, reason


def _decode_and_chunk(entry: _Entry, data: bytes, count_tokens, max_tokens: int,
                      links: Any = None) -> tuple[sources.Decoded, list, str]:
    """Decode and chunk one document: ``(decoded, chunks, skip reason or "")``.

    Shared by ``refresh`` and ``plan`` so a dry run predicts exactly what a run stores.
    ``links``: a zero-argument callable giving the source's link titles (notes sources).
    """
    decoded = sources.decode(data)
    if decoded.text is None:
        log.warning("%s: skipped: %s", entry.path, decoded.warning)
        return decoded, [], decoded.warning
    if decoded.warning:
        log.warning("%s: %s", entry.path, decoded.warning)
    from varaverk.documents.chunking import chunk_document

    decoded = _mask(decoded, entry.kind)
    titles = links() if links is not None and entry.kind in NOTE_KINDS else None
    chunks = chunk_document(entry.path, entry.kind, decoded.text, max_tokens=max_tokens,
                            count_tokens=count_tokens, links=titles)
    decoded = _report_masked(entry.path, decoded, chunks)
    if entry.source != DEFAULT_SOURCE:
        chunks = [replace(c, source=entry.source) for c in chunks]
    if not chunks:
        return decoded, [], REASON_NO_HEADER if entry.kind == "header" else REASON_NO_TEXT
    return decoded, chunks, ""


MASK_NOTE = "masked secret-looking values on line"
_COMMENT_LEAD = re.compile(r"^[\s#;/*!-]+")
EXAMPLE = "example: "  # marks a masked documentation example among ``Decoded.masked``


def _mask(decoded: sources.Decoded, kind: str = "") -> sources.Decoded:
    """The document with secret-looking values masked before chunking (so before embedding
    and FTS), every masked value in ``masked`` (documentation examples marked ``EXAMPLE``);
    ``_report_masked`` keeps the indexed ones."""
    from varaverk.secret_patterns import mask_secrets

    masked = mask_secrets(decoded.text, kind)
    found = masked.hits + tuple((line, EXAMPLE + what) for line, what in masked.examples)
    return decoded._replace(text=masked.text, masked=found) if found else decoded


def _report_masked(path: str, decoded: sources.Decoded, chunks: list) -> sources.Decoded:
    """Keep and log (as warnings) only the masked values whose line a chunk holds: a value in
    a script's body or an unindexed part of a file never reaches the index, so it is no
    finding and must not bury the real ones."""
    if not decoded.masked:
        return decoded
    from varaverk.secret_patterns import MASK

    lines = decoded.text.split("\n")
    metas = repr([c.meta for c in chunks])  # front matter and org drawers: chunk metadata

    def indexed(line: int, what: str) -> bool:
        # Within a chunk's range and in its text: a range may span code between two comment
        # blocks, and chunkers drop comment markers and indentation.
        bare = _COMMENT_LEAD.sub("", lines[line - 1]).strip()
        return any(c.start_line <= line <= c.end_line and bare in c.text for c in chunks) \
            or f"'{what.removeprefix(EXAMPLE)}': '{MASK}" in metas

    kept = tuple(hit for hit in decoded.masked if indexed(*hit))
    for line, what in kept:
        if what.startswith(EXAMPLE):  # information: nothing to remove
            log.info("%s: line %d: masked a documentation example (%s) before indexing", path,
                     line, what.removeprefix(EXAMPLE))
        else:
            log.warning("%s: line %d: masked a secret-looking value (%s) before indexing; "
                        "remove it from the repository", path, line, what)
    return decoded._replace(masked=kept)


def masked_note(hits) -> str:
    """The file row's reason for a document with masked values: ``masked secret-looking
    values on line(s) 4, 9 (DB_PASSWORD, token)``; "" when all are documentation examples."""
    hits = [(line, what) for line, what in hits if not what.startswith(EXAMPLE)]
    if not hits:
        return ""
    lines = sorted({line for line, _ in hits})
    whats = sorted({what for _, what in hits})
    return (f"{MASK_NOTE}{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))} "
            f"({', '.join(whats)})")


def _differences(entries: list[_Entry], states: dict, root: Path, meta: dict
                 ) -> tuple[list[str], list[str], list[str]]:
    """``(changed, added, removed)`` paths between the classified tracked paths and the stored
    rows, by ``lstat`` only; only a racy file (``_racy``) whose stat matches is read and
    hashed."""
    changed, added = [], []
    since = _racy_since(meta)
    for entry in entries:
        stored = states.get(entry.path)
        if stored is None:
            added.append(entry.path)
        elif entry.reason:
            if not _skip_unchanged(entry, stored):
                changed.append(entry.path)
        elif not _stat_unchanged(entry, stored) or (
                _racy(stored, since) and not _same_bytes(root, entry, stored)):
            changed.append(entry.path)
    current = {e.path for e in entries}
    return changed, added, sorted(p for p in states if p not in current)


def _config_key(settings) -> tuple[str, str]:
    """The embedder the settings name, as written (for ``store.names_other_embedder``)."""
    return settings.ai_embed_backend, settings.ai_embed_model.strip()


def _needs_work(settings, listing, entries, states, meta) -> bool:
    if _heads_moved(listing, meta):
        return True
    if states and meta.get("chunker") != chunker_stamp():
        return True
    if states and meta.get(VERDICTS_META) != listing.glob_verdicts:
        return True  # new globs (or candidates): decided afresh, then recorded by the write
    if names_other_embedder(meta, *_config_key(settings)):
        return True
    return any(_differences(entries, states, listing.root, meta))


# ---------------------------------------------------------------------------------------------
# refresh
# ---------------------------------------------------------------------------------------------

EmbedderLike = Any  # varaverk.embedding.Embedder, or a zero-argument factory returning one


def _default_lock(settings) -> ContextManager:
    from varaverk.locking import index_lock
    return index_lock(settings.index_path, settings.ai_index_lock_timeout)


def refresh(settings, embedder: EmbedderLike = None, *, force: bool = False,
            progress: Any = None, lock: Callable[[], ContextManager] | None = None
            ) -> IndexReport:
    """Bring the index at ``settings.index_path`` in step with the repository.

    Args:
        settings: ``varaverk.config.Settings`` (repo root, globs, data dir, lock timeout).
        embedder: an ``Embedder``, a zero-argument callable returning one (called only when
            something must be embedded or checked), or None for
            ``varaverk.embedding.make_embedder(settings)``, likewise lazily.
        force: rebuild every document from scratch (another model is then allowed).
        progress: None shows a tqdm bar when stderr is a terminal; False shows none; a callable
            ``progress(done, total)`` is called after each embedding batch.
        lock: a zero-argument callable returning the context manager that guards writing;
            None takes the index lock (``varaverk.locking.index_lock``). It is entered only when
            there is something to write.

    Returns:
        An ``IndexReport``.

    Raises:
        IndexMismatch: the index holds vectors of another backend/model/dimension (not force).
        LockBusy: another run held the lock past ``AI_INDEX_LOCK_TIMEOUT``.
        EmbeddingUnavailable: no embedding server reachable (nothing written).
        SourcesError: the repository cannot be listed.
    """
    started = time.monotonic()
    report = IndexReport(force=force)
    matcher = sources.KindMatcher.from_settings(settings)  # compiled only if a kind is needed
    index_path = Path(settings.index_path)

    if not force and index_path.is_file():
        # Optimistic pass without the lock: most runs (cron, after a pull) find nothing to do.
        try:
            with Index.open(index_path, readonly=True) as idx:
                states, meta = idx.file_states(), idx.meta()
        except (IndexCorrupt, IndexMissing):
            # An older schema (the locked pass migrates or explains), or a file another run
            # has just created and not yet filled: the locked pass sorts both out.
            states, meta = None, None
        listing, entries = _list_all(settings, matcher, states, meta)
        if states is not None and not _needs_work(settings, listing, entries, states, meta):
            _fill_counts(report, listing, entries, states)
            report.unchanged = sum(1 for e in entries if not e.reason
                                   and getattr(states.get(e.path), "status", "") != "skipped")
            report.seconds = time.monotonic() - started
            return report

    factory = _embedder_factory(settings, embedder)
    with (lock() if lock is not None else _default_lock(settings)):
        report.locked = True
        with Index.open(index_path) as idx:
            run = _Run(settings, idx, None, factory, force, progress, report, started,
                       states={} if force else idx.file_states(), meta=idx.meta(),
                       changes=IndexChanges(replace_all=force))
            # --force (no states) decides every kind afresh.
            run.listing, run.entries = _list_all(settings, matcher,
                                                 None if force else run.states, run.meta)
            _refresh_locked(run)
    return report


def _embedder_factory(settings, embedder: EmbedderLike) -> Callable[[], Any]:
    cache: list[Any] = []

    def get():
        if not cache:
            if embedder is None:
                from varaverk.embedding import make_embedder
                cache.append(make_embedder(settings))
            elif callable(embedder) and not hasattr(embedder, "embed"):
                cache.append(embedder())
            else:
                cache.append(embedder)
        return cache[0]
    return get


def _fill_counts(report: IndexReport, listing, entries, states) -> None:
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


@dataclass
class _Pending:
    """A read and chunked document waiting for its vectors (its future file row)."""

    path: str
    kind: str
    size: int
    mtime_ns: int
    sha256: str
    encoding: str
    chunks: list  # list[Chunk]
    note: str = ""  # kept as the file row's reason: values masked as secrets
    source: str = DEFAULT_SOURCE


@dataclass
class _Run:
    """One locked refresh: what it reads, what it will write, and its report.

    ``states``/``meta`` are the stored rows and meta read under the lock; ``rechunk`` is set
    when the chunkers changed since the last run (every document is re-read and re-chunked).
    """

    settings: Any
    idx: Index
    listing: Any
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
    entries: list = field(default_factory=list)  # list[_Entry], every source's
    _links: dict = field(default_factory=dict)   # source name -> its link titles

    def links_of(self, entry: _Entry) -> Callable[[], dict]:
        """A callable giving the link titles of the entry's source (read once per run)."""
        return lambda: _cached_links(self._links, entry.source, self.entries, self.listing.root)


def _refresh_locked(run: _Run) -> None:
    """The locked pass: compare, read, chunk, embed and write, in that order (see module doc)."""
    listing, entries, report, started = run.listing, run.entries, run.report, run.started
    _load_stored(run)
    report.tracked = len(listing.entries)
    report.head = listing.head
    report.documents = sum(1 for e in entries if e.kind)
    for entry in entries:
        _scan_entry(run, entry)
    _record_deletions(run, entries)
    report.timings["prepare"] = time.monotonic() - started
    if run.pending:
        _embed_pending(run)
    elif run.force:
        emb = run.get_embedder()
        run.changes.embedder = (emb.backend, emb.model, None)
    if not _has_changes(run):
        report.seconds = time.monotonic() - started
        return  # another run did the work while we waited for the lock
    _write(run)


def _load_stored(run: _Run) -> None:
    """Judge the stored rows and meta (read with the listing); refuse another embedder
    before any work."""
    run.stamp = chunker_stamp()
    # New chunking rules: re-chunk every document (unchanged chunk texts keep their vectors).
    run.rechunk = bool(run.states) and run.meta.get("chunker") != run.stamp
    if run.rechunk:
        log.info("the chunkers changed since the last run: every document is re-chunked")
    if not run.force and names_other_embedder(run.meta, *_config_key(run.settings)):
        emb = run.get_embedder()  # the settings changed: refuse another model before any work
        check_compatible(run.meta, emb.backend, emb.model)


def _scan_entry(run: _Run, entry: _Entry) -> None:
    """Decide one tracked path: skipped, unchanged by stat, unchanged by hash, or pending."""
    stored = run.states.get(entry.path)
    if entry.reason:
        _record_skip(run, entry, stored)
        return
    if not run.rechunk and _stat_unchanged(entry, stored) \
            and not _racy(stored, _racy_since(run.meta)):
        if stored.status == "skipped":
            run.report.skipped.append((entry.path, stored.reason))
        else:
            run.report.unchanged += 1
        return
    data, reason = _read(run.listing.root, entry)
    if data is None:
        run.report.skipped.append((entry.path, reason))
        run.changes.replace_chunks_of.append(entry.path)
        run.changes.file_rows.append(FileRow(entry.path, entry.kind, -1, -1, "", "skipped",
                                             reason, source=entry.source))
        return
    run.report.files_read += 1
    sha = _sha256(data)
    if not run.rechunk and stored is not None and stored.sha256 == sha \
            and stored.status != "partial" and stored.kind == entry.kind:
        _record_same_content(run, entry, stored, sha)
        return
    _chunk_entry(run, entry, data, sha)


def _record_skip(run: _Run, entry: _Entry, stored: FileState | None) -> None:
    """A path skipped before any read (not a doc, submodule, symlink...)."""
    run.report.skipped.append((entry.path, entry.reason))
    if _skip_unchanged(entry, stored):
        return
    # Logged when a path's state changes (so the first run logs every skip); --status lists
    # them all, every time.
    suffix = "; its chunks are removed" if stored and stored.chunk_count else ""
    log.info("%s: skipped: %s%s", entry.path, entry.reason, suffix, extra=DETAIL)
    run.changes.replace_chunks_of.append(entry.path)
    run.changes.file_rows.append(FileRow(entry.path, entry.kind, *_skip_stat(entry), "",
                                         "skipped", entry.reason, source=entry.source))


def _record_same_content(run: _Run, entry: _Entry, stored: FileState, sha: str) -> None:
    """Same content under a new mtime: record the new stat, keep chunks and vectors."""
    if stored.status == "skipped":
        run.report.skipped.append((entry.path, stored.reason))
    else:
        run.report.rehashed += 1
    st = entry.st
    run.changes.file_rows.append(FileRow(entry.path, entry.kind, st.st_size, st.st_mtime_ns,
                                         sha, stored.status, stored.reason, stored.chunk_count,
                                         stored.encoding, entry.source))


def _chunk_entry(run: _Run, entry: _Entry, data: bytes, sha: str) -> None:
    """Decode and chunk a new or changed document; queue it for embedding or record a skip."""
    emb = run.get_embedder()
    decoded, chunks, reason = _decode_and_chunk(entry, data, emb.count_tokens, emb.max_tokens,
                                                run.links_of(entry))
    st = entry.st
    if reason:
        if decoded.text is not None:
            log.info("%s: skipped: %s", entry.path, reason, extra=DETAIL)
        _skip_read(run.changes, run.report, entry, st, sha, reason, decoded.encoding)
        return
    run.report.masked += len(decoded.masked)
    run.report.examples += sum(what.startswith(EXAMPLE) for _, what in decoded.masked)
    run.pending.append(_Pending(entry.path, entry.kind, st.st_size, st.st_mtime_ns, sha,
                                decoded.encoding, chunks,
                                masked_note(decoded.masked) if decoded.masked else "",
                                entry.source))


def _record_deletions(run: _Run, entries: list[_Entry]) -> None:
    """Stored paths no longer tracked lose their rows and chunks (deletions, renames)."""
    current = {e.path for e in entries}
    run.report.deleted = sorted(p for p in run.states if p not in current)
    run.changes.delete_paths = list(run.report.deleted)
    for path in run.report.deleted:
        log.info("%s: no longer tracked; its chunks are removed", path)


def _embed_pending(run: _Run) -> None:
    """Embed the pending documents' chunks (reusing stored vectors) and record their rows."""
    report, changes = run.report, run.changes
    emb = run.get_embedder()
    expect = None if run.force else run.meta
    if expect is not None:
        check_compatible(expect, emb.backend, emb.model)  # refused before any embedding
    reused = {} if run.force else _reusable_vectors(run.idx, run.pending)
    report.chunks_reused = len(reused)
    embed_started = time.monotonic()
    vectors, failures = _embed_all(
        emb, [c for p in run.pending for c in p.chunks if id(c) not in reused], run.progress,
        report, expect)
    vectors.update(reused)
    report.timings["embed"] = time.monotonic() - embed_started
    for item in run.pending:
        _record_embedded(run, item, vectors, failures)
    report.chunks_embedded = len(changes.new_chunks) - report.chunks_reused
    report.chunks_failed = len(report.failures)
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
    if failed:
        reason = (f"{len(failed)} of {len(item.chunks)} chunks failed to embed "
                  f"(retried next run): {failed[0]}")
        log.warning("%s: %s", item.path, reason)
        run.report.failures.extend((item.path, msg) for msg in failed)
        # size -1: the next run re-reads and re-embeds this file.
        run.changes.file_rows.append(FileRow(item.path, item.kind, -1, -1, "", "partial",
                                             reason, len(stored_chunks), item.encoding,
                                             item.source))
    else:
        run.report.indexed += 1
        run.changes.file_rows.append(FileRow(item.path, item.kind, item.size, item.mtime_ns,
                                             item.sha256, "indexed", item.note,
                                             len(stored_chunks), item.encoding, item.source))


def _has_changes(run: _Run) -> bool:
    """Whether the locked pass has anything to write (rows, chunks, HEAD or settings moved)."""
    changes = run.changes
    return bool(changes.file_rows or changes.delete_paths or changes.new_chunks or run.force
                or _heads_moved(run.listing, run.meta)
                or run.meta.get(VERDICTS_META) != run.listing.glob_verdicts
                or names_other_embedder(run.meta, *_config_key(run.settings)))


def _write(run: _Run) -> None:
    """Write everything in one transaction, with the run's meta."""
    report = run.report
    report.seconds = time.monotonic() - run.started
    run.changes.configured = _config_key(run.settings)
    # Every stat of this run came after its start: the racy rule's reference (wall clock).
    scan_started_ns = time.time_ns() - int((time.monotonic() - run.started) * 1e9)
    run.changes.meta.update(
        scan_started_ns=str(scan_started_ns),
        head=run.listing.head or "", repo_root=str(run.listing.root), built_at=_utc_now(),
        chunker=run.stamp, last_run="force" if run.force else "incremental")
    run.changes.meta[VERDICTS_META] = run.listing.glob_verdicts
    for name, head in run.listing.heads.items():
        if name != DEFAULT_SOURCE:
            run.changes.meta[_head_key(name)] = head
            run.changes.meta[f"root:{name}"] = run.listing.roots[name]
    if run.changes.new_chunks or run.force:
        run.changes.meta["build_seconds"] = f"{report.seconds:.3f}"
    write_started = time.monotonic()
    run.idx.write(run.changes)
    report.timings["write"] = time.monotonic() - write_started
    report.seconds = time.monotonic() - run.started
    report.wrote = True


def _cached_links(cache: dict, source: str, entries: list[_Entry], root: Path) -> dict:
    if source not in cache:
        from varaverk.documents.note_links import link_titles

        notes = [e for e in entries if e.source == source and not e.reason
                 and e.kind in NOTE_KINDS]
        cache[source] = link_titles((e.rel or e.path, e.kind, lambda e=e: _masked_text(root, e))
                                    for e in notes)
    return cache[source]


def _masked_text(root: Path, entry: _Entry) -> str | None:
    """A note's text as it is chunked (decoded, secrets masked), or None when unreadable.
    Link titles come from it, so a secret in one note's title never enters another's text."""
    data = _read(root, entry)[0]
    decoded = sources.decode(data) if data is not None else None
    if decoded is None or decoded.text is None:
        return None
    from varaverk.secret_patterns import mask_secrets
    return mask_secrets(decoded.text, entry.kind).text


def _reusable_vectors(idx: Index, pending: list) -> dict[int, list]:
    """``{id(chunk): [(chunk, stored vector)]}`` for new chunks whose embed text (context and
    text) is already stored for the same path: the same model gives the same vector, so it is
    kept instead of being computed again."""
    import numpy as np

    reused: dict[int, list] = {}
    for item in pending:
        old = idx.stored_vectors(item.path)
        if not old:
            continue
        for chunk in item.chunks:
            blob = old.get(chunk.embed_text)
            if blob is not None:
                reused[id(chunk)] = [(chunk, np.frombuffer(blob, dtype="<f4"))]
    return reused


def _skip_read(changes: IndexChanges, report: IndexReport, entry: _Entry, st, sha: str,
               reason: str, encoding: str) -> None:
    """Record a document that was read but yields nothing (binary, no header, empty)."""
    report.skipped.append((entry.path, reason))
    changes.replace_chunks_of.append(entry.path)
    changes.file_rows.append(FileRow(entry.path, entry.kind, st.st_size, st.st_mtime_ns, sha,
                                     "skipped", reason, 0, encoding, entry.source))


def _embed_all(emb, chunks: list, progress, report: IndexReport, expect=None):
    """Embed ``chunks``; returns ``({id(chunk): [(piece, vector), ...]}, {id(chunk): message})``.

    Texts are embedded shortest first (less padding for batched local inference). A chunk the
    server rejects as too long is halved with ``split_chunk`` and its halves retried, at most
    ``MAX_SPLIT_DEPTH`` times; any other failure is returned for the caller to record.
    ``expect``: the stored meta (None: a rebuild); the first vector of another length than the
    stored ones raises IndexMismatch at once (the model behind a name changed), instead of a
    probe request.
    """
    from varaverk.documents.chunking import split_chunk

    # Work items: (original chunk id, piece, depth). Originals keep their document order in the
    # result because pieces are collected per original in the order they were split.
    work = [(id(c), c, 0) for c in chunks]
    vectors: dict[int, list] = {}
    order: dict[int, list] = {}
    failures: dict[int, str] = {}
    total = len(work)
    bar = _progress_bar(progress, total)
    done = 0
    step = max(1, emb.batch_size * PROGRESS_BATCH_FACTOR) if hasattr(emb, "batch_size") else 64
    try:
        while work:
            work.sort(key=lambda w: len(w[1].embed_text))
            retry = []
            for start in range(0, len(work), step):
                batch = work[start:start + step]
                result = emb.embed([w[1].embed_text for w in batch])
                report.embed_calls += 1
                for i, (origin, piece, depth) in enumerate(batch):
                    vec = result.vectors[i]
                    if vec is not None and vector_problem(vec):
                        # The store would refuse the whole write: this chunk fails alone.
                        failures[origin] = "the embedder returned a zero or non-finite vector"
                        continue
                    if vec is not None and expect is not None:
                        check_compatible(expect, emb.backend, emb.model, len(vec))
                    if vec is not None:
                        order.setdefault(origin, []).append((piece, vec))
                        continue
                    failure = result.errors.get(i)
                    message = failure.message if failure else "no vector returned"
                    if failure is not None and failure.too_long and depth < MAX_SPLIT_DEPTH:
                        halves = split_chunk(piece, emb.count_tokens, emb.max_tokens)
                        if len(halves) > 1:
                            log.warning("%s: a chunk was too long for the embedder (%s); "
                                        "split in %d and retried", piece.path, message,
                                        len(halves))
                            retry.extend((origin, h, depth + 1) for h in halves)
                            total += len(halves) - 1
                            if bar is not None and hasattr(bar, "total"):
                                bar.total = total
                            continue
                    failures[origin] = message
                done += len(batch)
                _tick(bar, progress, done, total)
            work = retry
    finally:
        if bar is not None:
            bar.close()
    for origin, pieces in order.items():
        # Split pieces come back in embedding order; restore file order for storage.
        pieces.sort(key=lambda pv: (pv[0].start_line, pv[0].part))
        vectors[origin] = pieces
    return vectors, failures


def _progress_bar(progress, total: int):
    if progress is None and total and sys.stderr.isatty():
        from tqdm import tqdm
        return tqdm(total=total, unit="chunk", desc="embedding", file=sys.stderr, leave=False)
    return None


def _tick(bar, progress, done: int, total: int) -> None:
    if bar is not None:
        bar.n = done
        bar.refresh()
    elif callable(progress):
        progress(done, total)


def _sha256(data: bytes) -> str:
    import hashlib  # only runs that read a file need it
    return hashlib.sha256(data).hexdigest()


def _utc_now() -> str:
    import datetime as _dt
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


# ---------------------------------------------------------------------------------------------
# plan (--dry-run) and status
# ---------------------------------------------------------------------------------------------

def plan(settings, count_tokens: Callable[[str], int] | None = None, max_tokens: int = 256
         ) -> dict[str, Any]:
    """What an index run would index, without contacting any server or writing anything.

    Reads and chunks every tracked document (nothing else), exactly as ``refresh`` would.

    Args:
        settings: ``Settings``.
        count_tokens, max_tokens: the embedder's token counter and input budget (the local
            tokenizer works offline; remote backends count characters).

    Returns:
        ``{"repo_root", "head", "tracked" (every source's), "sources" (names), "kinds":
        {kind: {"files", "chunks"}},
        "files": [{"path", "kind", "chunks", "encoding"}], "skipped": [{"path", "kind",
        "reason"}], "chunks"}``.
    """
    listing, entries = _list_all(settings, sources.KindMatcher.from_settings(settings))
    kinds: dict[str, dict[str, int]] = {k: {"files": 0, "chunks": 0} for k in sources.KINDS}
    files, skipped = [], []
    links: dict = {}
    for entry in entries:
        data, reason = (None, entry.reason) if entry.reason else _read(listing.root, entry)
        if data is not None:
            decoded, chunks, reason = _decode_and_chunk(
                entry, data, count_tokens, max_tokens,
                lambda e=entry: _cached_links(links, e.source, entries, listing.root))
        if reason:
            skipped.append({"path": entry.path, "kind": entry.kind, "reason": reason})
            continue
        kinds.setdefault(entry.kind, {"files": 0, "chunks": 0})
        kinds[entry.kind]["files"] += 1
        kinds[entry.kind]["chunks"] += len(chunks)
        files.append({"path": entry.path, "kind": entry.kind, "chunks": len(chunks),
                      "encoding": decoded.encoding})
    return {"repo_root": str(listing.root), "head": listing.head, "tracked": len(listing.entries),
            "sources": [spec.name for spec in listing.specs],
            "kinds": kinds, "files": files, "skipped": skipped,
            "chunks": sum(k["chunks"] for k in kinds.values())}


def status(settings) -> dict[str, Any]:
    """The index's contents and whether it is behind the repository (``ai-index --status``).

    Opens the index read-only and compares with the repository by ``lstat`` only (only racy
    files are read and hashed; nothing is written, no server contacted).

    Returns:
        ``Index.status()`` plus ``"sources"`` (a list, one row per configured source, see
        ``_source_status``), ``"repository": {"root", "head", "tracked"}`` and
        ``"behind": {"head_moved", "stored_head", "changed", "added", "removed",
        "embedder_changed", "configured_embedder", "behind"}`` (path lists; embedder_changed:
        the settings name another embedder than built the index, so ``--force`` is needed).

    Raises:
        IndexMissing: no index yet. SourcesError: the repository cannot be listed.
    """
    with Index.open(settings.index_path, readonly=True) as idx:
        info = idx.status()
        states = idx.file_states()
    meta = info["meta"]
    listing, entries = _list_all(settings, sources.KindMatcher.from_settings(settings), states,
                                 meta)
    changed, added, removed = _differences(entries, states, listing.root, meta)
    head_moved = _heads_moved(listing, meta)
    # The settings name another embedder than the one that built the index: a refresh would
    # be refused until --force.
    embedder_changed = names_other_embedder(meta, *_config_key(settings))
    info["repository"] = {"root": str(listing.root), "head": listing.head,
                          "tracked": sum(1 for e in entries if e.source == DEFAULT_SOURCE)}
    info["behind"] = {"head_moved": head_moved, "stored_head": meta.get("head") or None,
                      "changed": changed, "added": added, "removed": removed,
                      "embedder_changed": embedder_changed,
                      "configured_embedder": "/".join(p for p in _config_key(settings) if p),
                      "behind": bool(head_moved or changed or added or removed
                                     or embedder_changed)}
    info["sources"] = _source_status(listing, entries, info.get("sources") or {}, meta,
                                     (changed, added, removed))
    return info


def _source_status(listing: _Listed, entries: list[_Entry], stored: dict, meta: dict,
                   differences: tuple[list[str], list[str], list[str]]) -> list[dict]:
    """One row per configured source: ``{"name", "type", "root", "head", "tracked", "files",
    "skipped", "chunks", "behind"}`` (counts from the index; ``behind``: HEAD moved or a path
    of this source changed, was added or removed)."""
    moved = {p for paths in differences for p in paths}
    rows = []
    for spec in listing.specs:
        mine = [e for e in entries if e.source == spec.name]
        counts = stored.get(spec.name, {"files": 0, "skipped": 0, "chunks": 0})
        behind = listing.heads[spec.name] != meta.get(_head_key(spec.name), "") or any(
            e.path in moved for e in mine) or any(
            _stored_source(p, listing) == spec.name for p in differences[2])
        rows.append({"name": spec.name, "type": spec.type, "root": listing.roots[spec.name],
                     "head": listing.heads[spec.name] or None, "tracked": len(mine), **counts,
                     "behind": bool(behind)})
    return rows


def _stored_source(path: str, listing: _Listed) -> str:
    from varaverk.named_sources import source_of_path
    return source_of_path(path, [s.name for s in listing.specs])
