"""Ranking rules: the boosts added to fused scores, and the order rules after them.

Boosts are added to the fused score (``fusion``, RRF units); they reorder, they never remove:

- **section routing** (``varaverk.retrieval.routing``): chunks of the section the question's
  shape points to gain ``section_boost``;
- **exact names**: a name written in the question (``MOVER_STOP_TIMEOUT``, ``--force-delete``,
  ``auth.session_length``, anything in backticks) lifts the chunk *titled* with that name above
  everything else (``NAME_TITLE_BOOST``), and chunks merely containing it a little
  (``NAME_TEXT_BOOST``).

Then ``prefer_headers`` puts a script header's key before a template's copy of it, and
``mark_aliases`` marks hits whose note aliases the question names (the relevance verdict
trusts those).

Only the leading candidates are ranked this far (``leading``), and chunk text is read only
where a rule needs it: the vector table knows every row's kind, section and title.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from varaverk.retrieval import caches
from varaverk.retrieval.caches import RowLabel, TableCache
from varaverk.retrieval.candidates import DenseCandidates
from varaverk.retrieval.fusion import UNIT, Fused
from varaverk.retrieval.hits import Hit
from varaverk.retrieval.options import RetrieverOptions
from varaverk.retrieval.question import Filters, Question
from varaverk.retrieval.routing import route
from varaverk.text import normalise_title

# In RRF units (``fusion.UNIT``), as every boost.
NAME_TITLE_BOOST = 10.0     # the chunk titled with a name written in the query goes first
NAME_TEXT_BOOST = 0.5       # chunks that merely mention it get a nudge


@dataclass(frozen=True, slots=True)
class Boosts:
    """The boosts of one question.

    Attributes:
        section: the upper-case section the question's shape routes to; None: no routing.
        names: the question's exact names, normalised as titles are (``normalise_title``).
        section_bonus: what a routed chunk gains, in fused units.
        routing_kinds: the chunk kinds routing may boost; None: every kind.
    """

    section: str | None
    names: tuple[str, ...]
    section_bonus: float
    routing_kinds: tuple[str, ...] | None

    @classmethod
    def of(cls, question: Question, options: RetrieverOptions) -> Boosts:
        return cls(_routed_section(question.text) if options.routing else None,
                   tuple(normalise_title(n) for n in question.names),
                   options.section_boost * UNIT, options.routing_kinds)

    def routes(self, kind: str, section: str) -> bool:
        """Whether section routing boosts a chunk of this kind and (upper-case) section."""
        return bool(self.section) and section == self.section and (
            self.routing_kinds is None or kind in self.routing_kinds)

    def routed_rows(self, table: TableCache) -> np.ndarray | None:
        """bool (n + 1,): the rows section routing boosts (None: no section), then False,
        which row -1 (a candidate without a vector row) reads; kept with the table, per
        section."""
        if not self.section:
            return None
        key = (self.section, self.routing_kinds)
        found = table.routed.get(key)
        if found is None:
            found = np.append(table.sections_upper == self.section, False)
            if self.routing_kinds is not None:
                found[:-1] &= np.isin(np.asarray(table.table.kinds), list(self.routing_kinds))
            table.routed[key] = found
        return found


# The dock is asked the same questions again and again, and reading a question's shape from
# its wording is a pass of regular expressions over it: the section depends on the text alone.
@functools.lru_cache(maxsize=4096)
def _routed_section(text: str) -> str | None:
    """The section ``routing.route`` boosts for a question (None: none)."""
    return route(text).section


def leading(fused: Fused, name_ids: list[int], boosts: Boosts, table: TableCache,
            ranked: int) -> Fused:
    """The candidates worth reading for ``ranked`` results: the best ``3 × ranked + 10`` by
    fused score plus section boost (what the vector table already knows; ties: lower id
    first), then every chunk an exact name found. A chunk outside them cannot reach the top
    except through an exact name.

    Returns:
        Their ids, table rows and fused scores (boosts not added), in that order, with
        ``routed``: bool (m,), whether section routing boosts the table's row.
    """
    routed = boosts.routed_rows(table)
    if routed is None:
        boosted, prelim = np.zeros(fused.ids.size, dtype=bool), fused.scores
    else:
        boosted = routed[fused.rows]
        prelim = fused.scores + boosts.section_bonus * boosted
    # The ids ascend, so a stable sort puts the lower id first among equal scores.
    order = (-prelim).argsort(kind="stable")[: ranked * 3 + 10]
    if name_ids:
        chosen = set(fused.ids[order].tolist())
        extra = [cid for cid in name_ids if cid not in chosen]
        if extra:
            order = np.concatenate((order, fused.ids.searchsorted(extra)))
    return Fused(fused.ids[order], fused.rows[order], fused.scores[order], boosted[order])


def boosted_hits(lead: Fused, boosts: Boosts, filters: Filters, dense: DenseCandidates,
                 lexical_of: dict[int, float], unknown: tuple[str, ...],
                 table: TableCache) -> list[Hit]:
    """The Hits of the leading candidates with section and name boosts applied, in the order
    given; a candidate that fails the filters or vanished since the vector table was read is
    left out. Chunk text is read only where ranking needs it: for the name boosts, and for
    candidates the vector table does not describe (no usable vector). A hit whose chunk was
    not read holds its ``RowLabel``.

    Args:
        lead: ``leading``'s candidates.
        dense: the dense candidates (every row's cosine, the best one).
        lexical_of: {chunk id: BM25} of the candidates found lexically.
        unknown: the question's unknown names (``Question.unknown``).
    """
    names = boosts.names
    have_labels = len(table.titles) == len(table.ids)
    keep, rows = lead.ids.tolist(), lead.rows.tolist()
    read = keep if (names or not have_labels) else [c for c, r in zip(keep, rows) if r < 0]
    chunks = table.read_chunks(read)
    # Every row's cosine is known when dense ran (for the threshold and the report).
    cosines = (dense.scores[lead.rows].tolist() if dense.scores is not None
               else [None] * len(keep))
    bonus, row_labels = boosts.section_bonus, table.row_labels
    hits: list[Hit] = []
    for cid, row, score, routed, cos in zip(keep, rows, lead.scores.tolist(),
                                            lead.routed.tolist(), cosines):
        chunk = chunks.get(cid)
        if row < 0 or not have_labels:
            if chunk is None or not filters.passes(chunk):
                continue
            boosted = boosts.routes(chunk.kind, (chunk.section or "").upper())
            label = chunk
        elif chunk is None:
            if names:
                continue  # removed since the vector table was read
            label, boosted = row_labels.get(row), routed
            if label is None:  # caches.kept inline: a closure per candidate costs as much again
                if len(row_labels) >= caches.CHUNK_CACHE:
                    row_labels.clear()
                label = row_labels[row] = RowLabel(cid, table.kinds[row], table.titles[row])
        else:
            label = chunk
            # the table's verdict holds unless the chunk now read has another kind
            boosted = routed if chunk.kind == table.kinds[row] else boosts.routes(
                chunk.kind, table.sections[row])
        if boosted:
            score += bonus
        exact = False
        if names:
            name_bonus, exact = _name_bonus(names, label.title or "", table.lowered_text(chunk))
            score += name_bonus
        # Hit(chunk, score, dense, lexical, exact, section_boosted, best_dense, unknown):
        # positional, as keywords cost more than the rest of this loop's work
        hits.append(Hit(label, score, cos if row >= 0 else None, lexical_of.get(cid), exact,
                        boosted, dense.best, unknown))
    return hits


def _name_bonus(norm_names: Sequence[str], title: str, text: str) -> tuple[float, bool]:
    """The exact-name boost of one chunk: (bonus in fused units, whether a name is its
    title). The first name that is the chunk's title (or its title's first word) wins
    ``NAME_TITLE_BOOST``; else the first name its text contains wins ``NAME_TEXT_BOOST``.
    ``text``: the chunk's text, lower-cased."""
    title = _title_key(title)
    for n in norm_names:
        # a title's first word is in the title: the split only for titles holding the name
        if title and (title == n or (n in title and title.split()[0:1] == [n])):
            return NAME_TITLE_BOOST * UNIT, True
        if n in text:
            return NAME_TEXT_BOOST * UNIT, False
    return 0.0, False


def prefer_headers(hits: list[Hit]) -> None:
    """Rank a script header's key before a template's copy of the same key (in place).

    Templates repeat the keys that script headers document, sometimes with stale defaults; the
    header is the source of truth. A template chunk titled like a header chunk among the hits
    is moved just below that header chunk when it scored above it; nothing is removed.
    """
    best_header: dict[str, float] = {}
    templates: list[Hit] = []
    for h in hits:
        c = h.chunk
        if c.kind == "header" and c.title:
            key = _title_key(c.title)
            best_header[key] = max(best_header.get(key, float("-inf")), h.score)
        elif c.kind == "template" and c.title:
            templates.append(h)
    if not best_header:
        return
    for h in templates:
        header = best_header.get(_title_key(h.chunk.title))
        if header is not None and h.score >= header:
            h.score = header - 1e-9


# The same chunk titles come back among the candidates of query after query, and normalising
# them was most of prefer_headers' work; titles are the index's, never the question's.
_title_key = functools.lru_cache(maxsize=4096)(normalise_title)


# A result at least this share of whose text (characters, white space left out) is links,
# images or bare URLs is a list of pointers elsewhere, not an answer.
LINK_SHARE = 0.5
# How many results with content a thin result (``thin``) moves below: the one it outranked
# (more moves rank alike on every dev corpus or lose prompt hits).
THIN_DROP = 1
# A Markdown link or image (the label with its target), an RST ``<target>`` or a bare URL.
_LINK = re.compile(r"!?\[[^\]]*\]\([^)]*\)|`[^`<]*<[^>]+>`_*|<?\b[a-z][a-z0-9+.-]*://[^\s>)]+>?")
_HEADING_LINE = re.compile(r"^\s*(#+\s.*|[=\-~^*#]{3,})\s*$", re.M)


def thin(text: str, share: float | None = None) -> bool:
    """Whether a result's text has no content of its own: nothing but headings and links
    (a title-only chunk, an image), or at least ``share`` (default ``LINK_SHARE``) of its
    characters, white space left out, in links, images and URLs (a list of external links).
    """
    return _thin(text, LINK_SHARE if share is None else share)


# The same leading chunks come back query after query, and their regular expressions were
# the largest part of a warm hybrid query (tests/benchmarks/bench_scoring.py): the verdict
# depends on the text alone.
@functools.lru_cache(maxsize=4096)
def _thin(text: str, share: float) -> bool:
    solid = "".join(text.split())
    if not solid:
        return True
    linked = sum(len("".join(m.group(0).split())) for m in _LINK.finditer(text))
    if linked >= share * len(solid):
        return True
    rest = _LINK.sub("", _HEADING_LINE.sub("", text))
    return not any(ch.isalnum() for ch in rest)


def demote_thin(hits: list[Hit], drop: int | None = None) -> list[Hit]:
    """Move each result whose text is thin (``thin``: links only, or no body) below the next
    ``drop`` (default ``THIN_DROP``) results with content, keeping the order otherwise; a
    result titled with a name in the query (``Hit.exact``) never moves. Scores are unchanged
    and nothing is removed.

    Args:
        hits: ranked hits with their (merged) chunks read, best first.

    Returns:
        The same hits in a new list.
    """
    drop = THIN_DROP if drop is None else drop
    out: list[Hit] = []
    waiting: list[tuple[int, Hit]] = []      # (results with content still to pass, hit)
    for h in hits:
        if not h.exact and thin(h.chunk.text):
            waiting.append((drop, h))
            continue
        out.append(h)
        waiting = [(n - 1, w) for n, w in waiting]
        while waiting and waiting[0][0] <= 0:
            out.append(waiting.pop(0)[1])
    out.extend(w for _, w in waiting)
    return out


def mark_aliases(query: str, hits: Sequence[Hit]) -> None:
    """Set ``Hit.alias`` on hits whose note aliases (``chunk.meta["aliases"]``) the query
    names as whole words, case-insensitively (aliases under 3 characters are ignored)."""
    text = " ".join(query.lower().split())
    for h in hits:
        meta = getattr(h.chunk, "meta", None)
        aliases = meta.get("aliases") if isinstance(meta, dict) else None
        if not isinstance(aliases, list):
            continue
        h.alias = any(len(a) >= 3 and re.search(rf"(?<!\w){re.escape(' '.join(a.lower().split()))}"
                                                rf"(?!\w)", text) for a in map(str, aliases))
