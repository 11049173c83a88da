"""Similar sections: the chunks nearest to a stored section, from other files.

``similar(index, "vault:Backups/Restic.md#Retention", k)`` averages the stored vectors of the
section's chunks (every chunk of the file when no heading is given), scores every other chunk
by cosine similarity (one matrix-vector product over the index's float32 matrix) and returns
the best chunk of each of the k nearest sections, never one of the file's own. No model is
asked: the vectors are the index's own, so it works offline and whatever the embedder.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from varaverk.documents.chunks import heading_path
from varaverk.retrieval.hits import Hit


class SectionNotFound(LookupError):
    """The path is not indexed, or holds no section with that heading; the message says which."""


def split_target(target: str, known_path) -> tuple[str, str]:
    """``PATH[#heading]`` -> ``(path, heading or "")``. A path that is itself indexed wins
    over a split at ``#`` (file names may hold ``#``); ``known_path(p)`` says whether it is."""
    if known_path(target) or "#" not in target:
        return target, ""
    path, _, heading = target.rpartition("#")
    return path, heading.strip()


def _matches(chunk, heading: str) -> bool:
    wanted = heading.casefold()
    return wanted in {(chunk.title or "").casefold(), heading_path(chunk).casefold(),
                      (chunk.section or "").casefold()}


def similar(index, target: str, k: int = 5, sources: Iterable[str] | None = None) -> list:
    """The nearest sections to ``target`` (``PATH`` or ``PATH#heading``), best first.

    Args:
        index: an open ``varaverk.index.store.index.Index``.
        target: a stored path (``Backup/rsync_mirror.sh``, ``vault:Restic.md``), optionally
            ``#`` and a heading, section or title of that file (case-insensitive).
        k: how many sections. sources: keep only chunks of these source names (None: all).

    Returns:
        ``varaverk.retrieval.hits.Hit`` list, ``score`` and ``dense`` the cosine similarity.

    Raises:
        SectionNotFound: the path has no chunks, or none under that heading.
    """
    path, heading = split_target(target, lambda p: bool(index.chunks_for_path(p)))
    own = index.chunks_for_path(path)
    if not own:
        raise SectionNotFound(f"{path} is not in the index (ai-index --status lists it)")
    chosen = [c for c in own if _matches(c, heading)] if heading else own
    if not chosen:
        headings = sorted({c.title for c in own if c.title})
        raise SectionNotFound(f"{path} has no section {heading!r}; its headings: "
                              + ", ".join(headings[:20]))
    table = index.vector_table()
    row_of = {int(i): r for r, i in enumerate(table.ids.tolist())}
    rows = [row_of[c.id] for c in chosen if c.id in row_of]
    if not rows:
        return []
    centre = table.matrix[rows].mean(axis=0)
    centre /= float(np.linalg.norm(centre)) or 1.0
    scores = table.matrix @ centre
    mask = np.ones(len(scores), dtype=bool)
    mask[[row_of[c.id] for c in own if c.id in row_of]] = False
    if sources is not None and table.sources is not None:
        mask &= np.isin(table.sources, sorted(set(sources)))
    order = [r for r in np.argsort(-scores, kind="stable") if mask[r]]
    hits, seen = [], set()
    for r in order:
        if len(hits) >= k:
            break
        [chunk] = index.get_chunks([int(table.ids[r])])
        key = (chunk.path, chunk.section, chunk.title)
        if key in seen:  # parts of one section: its best part stands for it
            continue
        seen.add(key)
        hits.append(Hit(chunk, float(scores[r]), dense=float(scores[r])))
    return hits
