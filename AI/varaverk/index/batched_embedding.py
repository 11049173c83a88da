"""The embedding loop of a refresh: chunks embedded in batches, shortest first, a chunk the
server finds too long halved and retried, progress shown or reported, and the vectors of
chunks whose text is already stored reused instead of computed again.

numpy, tqdm and ``split_chunk`` (with the chunk records) are imported only when there is
something to embed (the no-op refresh embeds nothing).
"""

from __future__ import annotations

import logging
import sys
from varaverk.index.report import IndexReport
from varaverk.index.store.compatibility import check_compatible
from varaverk.index.store.index import Index
from varaverk.index.store.vectors import vector_problem

log = logging.getLogger(__name__)

MAX_SPLIT_DEPTH = 4          # a too-long chunk is halved at most this many times (16 pieces)
PROGRESS_BATCH_FACTOR = 2    # texts per embed() call: batch size times this (progress steps)


def reusable_vectors(idx: Index, pending: list) -> dict[int, list]:
    """``{id(chunk): [(chunk, stored vector)]}`` for new chunks whose embed text (context and
    text) is already stored for the same path: the same model gives the same vector, so it is
    kept instead of being computed again. ``pending``: items with ``path`` and ``chunks``."""
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


class EmbedProgress:
    """The embedding progress of one run, across its batches (``embed_all`` calls): a tqdm bar
    on stderr when ``progress`` is None and stderr is a terminal, else ``progress(done,
    total)`` when callable; ``on_step(done, total)`` too (the index's progress file).

    The run embeds batch by batch as it reads, so ``total`` is the chunks queued so far: it
    grows with each batch and equals ``done`` at the end. ``close`` closes the bar.
    """

    def __init__(self, progress, on_step=None):
        self.progress, self.on_step = progress, on_step
        self.done = self.total = 0
        self.bar = None

    def grow(self, count: int) -> None:
        """``count`` more chunks (or pieces of a split chunk) to embed."""
        self.total += count
        if self.bar is None and self.total and self.progress is None and sys.stderr.isatty():
            from tqdm import tqdm
            self.bar = tqdm(total=self.total, unit="chunk", desc="embedding", file=sys.stderr,
                            leave=False)
        elif self.bar is not None:
            self.bar.total = self.total

    def step(self, count: int) -> None:
        """``count`` more embedded (or failed)."""
        self.done += count
        if self.on_step is not None:  # first: ``progress`` then sees the file as it is
            self.on_step(self.done, self.total)
        if self.bar is not None:
            self.bar.n = self.done
            self.bar.refresh()
        elif callable(self.progress):
            self.progress(self.done, self.total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def embed_all(emb, chunks: list, progress: EmbedProgress, report: IndexReport, expect=None):
    """Embed ``chunks``; returns ``({id(chunk): [(piece, vector), ...]}, {id(chunk): message})``.

    Texts are embedded shortest first (less padding for batched local inference). A chunk the
    server rejects as too long is halved with ``split_chunk`` and its halves retried, at most
    ``MAX_SPLIT_DEPTH`` times; any other failure is returned for the caller to record.
    ``progress``: the run's ``EmbedProgress`` (grown by ``len(chunks)`` here). ``expect``: the
    stored meta (None: a rebuild); the first vector of another length than the stored ones
    raises IndexMismatch at once (the model behind a name changed), instead of a probe request.
    """
    # Work items: (original chunk id, piece, depth). Originals keep their document order in the
    # result because pieces are collected per original in the order they were split.
    work = [(id(c), c, 0) for c in chunks]
    progress.grow(len(work))
    batches = _Batches(emb, progress, report, expect)
    while work:
        work.sort(key=lambda w: len(w[1].embed_text))
        retry = []
        for start in range(0, len(work), batches.step):
            retry += batches.embed(work[start:start + batches.step])
        work = retry
    return batches.result()


class _Batches:
    """One ``embed_all`` call: its vectors and failures so far."""

    def __init__(self, emb, progress: EmbedProgress, report: IndexReport, expect: dict | None):
        self.emb, self.progress, self.report, self.expect = emb, progress, report, expect
        self.step = (max(1, emb.batch_size * PROGRESS_BATCH_FACTOR)
                     if hasattr(emb, "batch_size") else 64)
        self.order: dict[int, list] = {}      # id(chunk) -> [(piece, vector)], as embedded
        self.failures: dict[int, str] = {}    # id(chunk) -> message

    def embed(self, batch: list) -> list:
        """Embed one batch of work items in one call; returns the halves to retry."""
        result = self.emb.embed([w[1].embed_text for w in batch])
        self.report.embed_calls += 1
        retry = []
        for i, (origin, piece, depth) in enumerate(batch):
            retry += self._take(origin, piece, depth, result, i)
        self.progress.step(len(batch))
        return retry

    def _take(self, origin: int, piece, depth: int, result, i: int) -> list:
        """Keep the ``i``-th vector of ``result`` for ``piece``, or record why there is none;
        a piece the server found too long comes back as halves to retry."""
        vec = result.vectors[i]
        if vec is not None and vector_problem(vec):
            # The store would refuse the whole write: this chunk fails alone.
            self.failures[origin] = "the embedder returned a zero or non-finite vector"
            return []
        if vec is not None:
            if self.expect is not None:
                check_compatible(self.expect, self.emb.backend, self.emb.model, len(vec))
            self.order.setdefault(origin, []).append((piece, vec))
            return []
        failure = result.errors.get(i)
        message = failure.message if failure else "no vector returned"
        if failure is not None and failure.too_long and depth < MAX_SPLIT_DEPTH:
            from varaverk.documents.budget import split_chunk  # the chunk records: rare

            halves = split_chunk(piece, self.emb.count_tokens, self.emb.max_tokens)
            if len(halves) > 1:
                log.warning("%s: a chunk was too long for the embedder (%s); "
                            "split in %d and retried", piece.path, message, len(halves))
                self.progress.grow(len(halves) - 1)
                return [(origin, h, depth + 1) for h in halves]
        self.failures[origin] = message
        return []

    def result(self) -> tuple[dict[int, list], dict[int, str]]:
        """``(vectors, failures)`` as ``embed_all`` returns them."""
        vectors: dict[int, list] = {}
        for origin, pieces in self.order.items():
            # Split pieces come back in embedding order; restore file order for storage.
            pieces.sort(key=lambda pv: (pv[0].start_line, pv[0].part))
            vectors[origin] = pieces
        return vectors, self.failures
