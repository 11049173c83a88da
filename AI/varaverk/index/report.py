"""``IndexReport``: what one ``refresh`` did, for the log line, ``--json`` and the tests."""

from __future__ import annotations

from collections import Counter


class IndexReport:
    """What one ``refresh`` did. Counts are files unless named chunks.

    Attributes:
        tracked: paths ``git ls-files`` listed. documents: of those, of a documentation kind.
        indexed: documents read, chunked and embedded this run.
        unchanged: documents skipped because their stat had not moved (not read).
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
        moved_aside: where ``--force`` moved a damaged index file ("" when it did not).
        timings: seconds per phase of a run that had work: ``prepare`` (list, stat, read,
            decode, chunk), ``embed``, ``write`` (the one transaction, all its batches).

    A plain class, not a dataclass: the no-op refresh returns one, and ``dataclasses`` costs
    that run more than its own work (it imports ``inspect``).
    """

    def __init__(self, *, force: bool = False):
        self.tracked: int = 0
        self.documents: int = 0
        self.indexed: int = 0
        self.unchanged: int = 0
        self.rehashed: int = 0
        self.skipped: list[tuple[str, str]] = []
        self.deleted: list[str] = []
        self.files_read: int = 0
        self.chunks_embedded: int = 0
        self.chunks_reused: int = 0
        self.chunks_failed: int = 0
        self.failures: list[tuple[str, str]] = []
        self.masked: int = 0
        self.examples: int = 0
        self.embed_calls: int = 0
        self.head: str | None = None
        self.wrote: bool = False
        self.locked: bool = False
        self.force: bool = force
        self.moved_aside: str = ""
        self.seconds: float = 0.0
        self.timings: dict[str, float] = {}

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready dict of the report (its lists and dict copied)."""
        return {name: (type(value)(value) if isinstance(value, (list, dict)) else value)
                for name, value in vars(self).items()}

    def summary(self) -> str:
        """One line for the log: what changed and how long it took."""
        if not self.tracked:
            return self.summary_head()
        return timed_summary(self.summary_head(), self.seconds)

    def summary_head(self) -> str:
        """``summary`` without the time it took (``timed_summary`` adds it)."""
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
        return f"index {verb}: " + ", ".join(parts)


def timed_summary(head: str, seconds: float) -> str:
    """A run's log line: its ``IndexReport.summary_head`` and the seconds it took."""
    return f"{head} in {seconds:.2f} s"
