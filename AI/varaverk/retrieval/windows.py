"""Context windows: small-to-big merging of results and packing a prompt's context.

Two steps around ranking (``varaverk.retrieval.search``) use this module:

1. **Merging results** (``merge_parts``, small-to-big for the result list). A ranked part of a
   split section comes back as its siblings joined in line order, nearest first, up to
   ``MERGE_CHARS``; a tiny chunk (under ``TINY_CHARS``: one option's paragraph, a bare heading,
   a banner's lines) comes back with the nearest chunks of its parent section, up to
   ``TINY_MERGE_CHARS``. Two results never hold the same lines, and a window is contiguous
   in the file (its line range holds its text and nothing else).
   Then a result whose text mostly repeats lines an earlier result shows (a near-copy: two
   example configurations that differ in one block) is listed after the others
   (``demote_repeats``), so the first results spend their characters on different text.
2. **Packing a prompt** (``expand``, small-to-big for the prompt). Every hit's own chunk
   first, best first, then each grows with its merged window and the rest of its section,
   within a character budget counted as ``varaverk.retrieval.context.format_context`` lays
   the groups out (citation labels included).

Chunks are ``varaverk.index.store.stored_chunk.StoredChunk`` (``id``, ``path``, ``section``,
``title``, ``part``, ``start_line``, ``end_line``, ``text``, ``citation``, ``meta``); hits are
``varaverk.retrieval.hits.Hit``. The caller owns reading and caching chunks: it passes
``file_chunks(path) -> that file's chunks in document order`` and, for merging,
``places_of(path) -> places(that file's chunks)``, which it keeps for an index generation.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, NamedTuple, Sequence

from varaverk.retrieval.context import group_block

MERGE_CHARS = 2500          # a split section is returned whole up to this size
# A chunk shorter than this (one option's paragraph, a bare heading, a banner's lines, a
# subsection of a few sentences) rarely holds a whole answer: it is "tiny" and comes back with
# the nearest chunks of its parent section up to TINY_MERGE_CHARS, small-to-big for the result
# list, as ``expand`` does for a prompt. Set with ai-eval on every dev corpus together, inside
# the range of sizes that rank alike (lower, short subsections are left alone).
TINY_CHARS = 600
TINY_MERGE_CHARS = 1000
# The share of a prompt's remaining budget that a hit whose merged window does not fit whole
# may spend on that window's nearest part before the hits after it get their own chunk (set
# with ai-eval's prompt hit on every dev corpus together, inside the range that packs alike).
WINDOW_SHARE = 0.7
# A result at least this share of whose text (by characters) is lines that earlier results
# already show is listed after the others (set with ai-eval on every dev corpus together, in
# the middle of the range that ranks alike).
REPEAT_SHARE = 0.5

FileChunks = Callable[[str], list]


# ---------------------------------------------------------------------------------------------
# Merging results
# ---------------------------------------------------------------------------------------------

class Group(NamedTuple):
    """Chunks of one file that merge with one another, in line order: the parts of a split
    section, the keys of a YAML block, or every chunk of one section (a tiny chunk's parent)."""

    chunks: tuple               # stored chunks, sorted by (start_line, part)
    ids: tuple[int, ...]        # their ids
    sizes: tuple[int, ...]      # len(text) of each, in characters
    texts: tuple[str, ...]      # each text without its trailing line breaks (as joined)


class Place(NamedTuple):
    """Where one stored chunk sits among the chunks it may merge with (``places``): a group
    and the chunk's index in it."""

    size: int                           # len(text) of the chunk, in characters
    own: tuple[Group, int] | None       # its split section's parts or YAML block's keys
    section: tuple[Group, int]          # its parent section (the same path and section)


def places(chunks: Sequence[Any]) -> dict[int, Place]:
    """{chunk id: Place} of one file's chunks (``file_chunks`` order): what ``merge_parts``
    needs to know of a file, worked out once for an index generation rather than for every
    hit. ``own`` is the chunk's YAML block (``meta["block"]``, same file) when it has one,
    else for a part (``part > 0``) the parts with its section and title, else None."""
    sections: dict[tuple[str, int], list] = {}
    blocks: dict[Any, list] = {}
    parts: dict[tuple[str, str], list] = {}
    run_of = _section_runs(chunks)
    for s in chunks:
        sections.setdefault(run_of[s.id], []).append(s)
        block = (getattr(s, "meta", None) or {}).get("block")
        if block:
            blocks.setdefault(block, []).append(s)
        if s.part > 0:
            parts.setdefault((s.section, s.title), []).append(s)
    by_section, by_block, by_parts = _positions(sections), _positions(blocks), _positions(parts)
    out: dict[int, Place] = {}
    for s in chunks:
        block = (getattr(s, "meta", None) or {}).get("block")
        if block:
            own = by_block[block][s.id]
        else:
            own = by_parts[(s.section, s.title)][s.id] if s.part > 0 else None
        out[s.id] = Place(len(s.text), own, by_section[run_of[s.id]][s.id])
    return out


def _section_runs(chunks: Sequence[Any]) -> dict[int, tuple[str, int]]:
    """{chunk id: (section, run number)}: a run is chunks of one section next to one another
    in the file. A section's chunks may be apart (a heading's subsections lie between two of
    its siblings); merging over the gap would claim lines the result does not hold."""
    out: dict[int, tuple[str, int]] = {}
    last: str | None = None
    run = 0
    for s in sorted(chunks, key=lambda s: (s.start_line, s.part)):
        if s.section != last:
            run += 1
            last = s.section
        out[s.id] = (s.section, run)
    return out


def _positions(groups: dict[Any, list]) -> dict[Any, dict[int, tuple[Group, int]]]:
    """{key: {chunk id: (its Group, its index there)}} of chunks grouped by key."""
    out: dict[Any, dict[int, tuple[Group, int]]] = {}
    for key, found in groups.items():
        found.sort(key=lambda s: (s.start_line, s.part))
        group = Group(tuple(found), tuple(s.id for s in found),
                      tuple(len(s.text) for s in found),
                      tuple(s.text.rstrip("\n") for s in found))
        out[key] = {cid: (group, i) for i, cid in enumerate(group.ids)}
    return out


def merge_parts(hits: Iterable, k: int, places_of: Callable[[str], dict[int, Place]]) -> list:
    """Return a split section as one result (small-to-big over the result list).

    A long section is stored as parts (``part`` 1..n, same path, section and title); a
    commented YAML block as one chunk per documented key with ``meta["block"]`` naming the
    block. When a part or a key of a block ranks, the result becomes its siblings joined
    in line order, nearest first, up to ``MERGE_CHARS`` (the whole section when it fits),
    with the merged line range; lower-ranked siblings already covered by it are dropped.
    A question about a long reference page then gets the paragraph around its match, not
    a fragment of it. A tiny chunk (under ``TINY_CHARS``, neither a part nor a key) grows
    the same way within its parent section, up to ``TINY_MERGE_CHARS``, and its hit is
    marked ``grown``.

    Args:
        hits: ranked hits with stored chunks, best first; taken one at a time, and none
            after the k-th result (so a lazy iterable reads no more than it must).
        k: the most results to return.
        places_of: the caller's ``places`` of a file's chunks, by path (module docstring);
            a chunk missing from its file's places is returned as it is.

    Returns:
        Up to k of the hits. A merged hit is changed in place: its chunk becomes a copy
        holding the joined text and line range, and ``grown`` is set.
    """
    out: list = []
    covered: set[int] = set()
    if k <= 0:
        return out
    for hit in hits:
        c = hit.chunk
        if c.id in covered:
            continue
        place = places_of(c.path).get(c.id)
        window = _window(place) if place is not None else None
        if window is None:
            covered.add(c.id)
        else:
            (group, pos), cap, grown = window
            # Siblings an earlier result holds are walls: the same lines twice would spend
            # the context budget twice.
            walls = (frozenset() if covered.isdisjoint(group.ids)
                     else {i for i, sid in enumerate(group.ids) if sid in covered})
            run = _around(group.sizes, pos, cap, walls)
            covered.update(group.ids[run.start:run.stop])
            if len(run) > 1:
                _join(hit, group, run, grown)
        out.append(hit)
        if len(out) >= k:
            break
    return out


def _window(place: Place) -> tuple[tuple[Group, int], int, bool] | None:
    """``((group, index), cap, grown)`` a ranked chunk merges within: its parts up to
    ``MERGE_CHARS``, its YAML block up to ``TINY_MERGE_CHARS``; for a tiny chunk (under ``TINY_CHARS`` and neither a part nor a
    key: alone it rarely holds an answer) its parent section up to ``TINY_MERGE_CHARS``,
    ``grown``; None for a whole chunk that is not tiny. The limits are read at each call,
    never kept in ``places`` (which lasts an index generation)."""
    if place.own is not None:
        # A block's key is a small chunk of its own, not a part of a long section: it grows as
        # a tiny chunk does, so a few results still fit one context.
        block = place.own[0].chunks[0].part == 0
        return place.own, (TINY_MERGE_CHARS if block else MERGE_CHARS), False
    if place.size < TINY_CHARS:
        return place.section, TINY_MERGE_CHARS, True
    return None


def _join(hit, group: Group, run: range, grown: bool) -> None:
    """Give ``hit`` a copy of its chunk holding the texts of ``group``'s chunks in ``run``
    joined and their line range, and set its ``grown`` as given.

    Chunks are shared through the retriever's caches, so they are copied, never changed. The
    copy is made from the instance's ``__dict__``, every field as it is but the ones set:
    ``dataclasses.replace`` runs the frozen chunk's ``__init__`` field by field, a measurable
    share of a whole query (tests/benchmarks/bench_scoring.py)."""
    c = hit.chunk
    chunk = object.__new__(type(c))
    chunk.__dict__.update(c.__dict__, text="\n".join(group.texts[run.start:run.stop]),
                          start_line=group.chunks[run[0]].start_line,
                          end_line=group.chunks[run[-1]].end_line)
    hit.chunk = chunk
    hit.grown = grown


def demote_repeats(hits: list, share: float = REPEAT_SHARE) -> list:
    """List results that mostly repeat earlier results' lines after the others.

    Real documentation holds near-copies: example configurations that differ in one block,
    one option in a page and in a sample config made from it. A near-copy ranks beside its
    original and spends the reader's and the context's characters on lines already shown.
    A hit at least ``share`` of whose text (by characters, each distinct line counted once)
    is lines of the results kept before it, as written, moves after every hit that is not,
    keeping its order among the moved ones. The first hit and a hit titled with a name in
    the query (``Hit.exact``) never move; scores, texts and line ranges are unchanged and
    nothing is removed.

    Args:
        hits: ranked hits, best first (``merge_parts`` output).
        share: in (0, 1]: the repeated share of its characters that moves a hit.

    Returns:
        The same hits in a new list, near-copies last.
    """
    kept: list = []
    moved: list = []
    shown: set[str] = set()
    for hit in hits:
        text = hit.chunk.text
        lines = set(text.splitlines())
        if kept and not hit.exact and text:
            common = lines & shown
            if common and sum(map(len, common)) >= share * len(text):
                moved.append(hit)
                continue
        kept.append(hit)
        shown |= lines
    return kept + moved


def _around(sizes: Sequence[int], pos: int, cap: int = MERGE_CHARS,
            walls: set[int] | frozenset[int] = frozenset()) -> range:
    """The indices of sibling ``pos`` and of a contiguous run of its nearest siblings, taken
    alternately after and before, while their sizes (``sizes``: characters of each sibling's
    text, in line order) together stay within ``cap``; ascending. The run stops at an index
    in ``walls`` (siblings an earlier result already holds), so a merged result never
    repeats another's lines, and at a sibling too long to fit, so it never claims lines it
    skipped."""
    lo = hi = pos
    used = sizes[pos]
    after = True
    while True:
        up = hi + 1 < len(sizes) and hi + 1 not in walls and used + sizes[hi + 1] <= cap
        down = lo > 0 and lo - 1 not in walls and used + sizes[lo - 1] <= cap
        if not (up or down):
            break
        if up and (after or not down):
            hi += 1
            used += sizes[hi]
        else:
            lo -= 1
            used += sizes[lo]
        after = not after
    return range(lo, hi + 1)


# ---------------------------------------------------------------------------------------------
# Packing a prompt
# ---------------------------------------------------------------------------------------------

def expand(hits: Sequence[Any], budget_chars: int, file_chunks: FileChunks) -> list[list[Any]]:
    """Hand each hit with its neighbouring parts / parent section, within a budget.

    The budget is split in two passes, so that a long result near the top cannot crowd
    out the match of a later one:

    1. best hit first, every hit is given its merged window whole when it fits, else its
       *seed* (the stored chunk that ranked) and the part of the window nearest it within
       ``WINDOW_SHARE`` of the budget left, while the seed fits (the first always does);
    2. then, best hit first, each given hit grows while the total fits: first with the
       rest of its merged window (nearest the seed first), then, for a part of a split
       chunk (``part > 0``) or a tiny chunk (under ``TINY_CHARS``, or ``Hit.grown``), with
       the other parts of that chunk or the rest of its parent section.

    A chunk is never given twice.

    Args:
        hits: ranked hits (``Retriever.search`` output), best first.
        budget_chars: the most characters of context to hand over, counted as
            ``varaverk.retrieval.context.format_context`` lays the groups out (citation labels and
            blank lines included), so a context made of them is never cut.
        file_chunks: the caller's reader of a file's stored chunks (module docstring).

    Returns:
        One list of chunks per hit (its seed included, in line order); a hit whose seed
        did not fit, or that an earlier hit already holds, gets an empty list.
    """
    plans = [_expansion(h, file_chunks) for h in hits]
    groups: list[list[Any]] = [[] for _ in hits]
    seen: set[int] = set()
    used = 0
    for group, (seed, win, _) in zip(groups, plans):
        if seed.id in seen:
            continue
        alone = _cost_of([seed])
        if used + alone > budget_chars and used:
            continue
        window = [seed] + [n for n in win if n.id not in seen]
        size = _cost_of(window)
        if used + size <= budget_chars:
            seen.update(n.id for n in window)
            used += size
            group.extend(window)
        else:
            # Too long whole: the part nearest the seed, within a share of what is left,
            # so the hits after it still get their own chunk.
            share = used + (budget_chars - used) * WINDOW_SHARE
            group.append(seed)
            seen.add(seed.id)
            used = _fill(group, win, seen, used + alone, share)
    for group, (_, win, extra) in zip(groups, plans):
        if group:
            used = _fill(group, win + extra, seen, used, budget_chars)
            group.sort(key=lambda x: (x.start_line, x.part))
    return groups


def _fill(group: list[Any], candidates: Sequence[Any], seen: set[int], used: float,
          limit: float) -> float:
    """Append ``candidates`` to ``group`` in order, each that no group holds yet and that
    keeps the context's size (``used`` characters, ``group`` counted) within ``limit``;
    marks them seen and returns the new size."""
    size = _cost_of(group)
    for n in candidates:
        # A chunk adds at least its own line: most of a long section is turned away without
        # laying the group out again.
        if n.id in seen or used + len(n.text.rstrip()) + 1 > limit:
            continue
        grown = _cost_of([*group, n])
        if used + grown - size <= limit:
            seen.add(n.id)
            used += grown - size
            size = grown
            group.append(n)
    return used


def _expansion(hit, file_chunks: FileChunks) -> tuple[Any, list[Any], list[Any]]:
    """(seed, window, extra) for ``expand``: the stored chunk that ranked; the other
    chunks of the window ``merge_parts`` merged around it, nearest the seed first; and its
    ``_neighbours`` outside that window when it is a part or tiny. A hit that was not
    merged is its own seed with an empty window."""
    c = hit.chunk
    chunks = file_chunks(c.path)
    seed = next((n for n in chunks if n.id == c.id), None)
    window: list[Any] = []
    if seed is None or (seed.start_line, seed.end_line) == (c.start_line, c.end_line):
        seed = c
    else:
        window = sorted((n for n in chunks if n.id != seed.id
                         and c.start_line <= n.start_line and n.end_line <= c.end_line),
                        key=lambda n: abs(n.start_line - seed.start_line))
    extra: list[Any] = []
    if seed.part > 0 or hit.grown or len(seed.text) < TINY_CHARS:
        taken = {n.id for n in window}
        extra = [n for n in _neighbours(seed, chunks) if n.id not in taken]
    return seed, window, extra


def _neighbours(chunk, chunks: Sequence[Any]) -> list[Any]:
    """Chunks of ``chunks`` (``chunk``'s file, in document order) that belong with
    ``chunk``: the other parts of a split chunk (same section and title), or, for a tiny
    chunk, the rest of its section; nearest in the file first."""
    out = []
    for n in chunks:
        if n.id == chunk.id:
            continue
        if chunk.part > 0:
            if n.part > 0 and n.section == chunk.section and n.title == chunk.title:
                out.append(n)
        elif chunk.section and n.section == chunk.section:
            out.append(n)
    out.sort(key=lambda x: abs(x.start_line - chunk.start_line))
    return out


def _cost_of(chunks: Sequence[Any]) -> int:
    """Characters a group made of ``chunks`` takes in a prompt's context, counted on
    ``varaverk.retrieval.context.group_block``'s own layout of the group in line order (labels, line
    breaks), with the blank line between groups; 0 for no chunks."""
    if not chunks:
        return 0
    return len(group_block(sorted(chunks, key=lambda c: (c.start_line, c.part)))) + 2
