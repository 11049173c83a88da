"""The embedder's input budget: drafts become chunks that fit it, split into parts 1..n.

``budget_draft`` turns one ``Draft`` into a ``Chunk``, or into parts 1..n when its
``embed_text`` would exceed the budget: the context is repeated in every part and each part's
line range narrowed. Nothing is ever truncated: every character of a draft's text ends up in
exactly one part (white space at part boundaries aside). ``split_chunk`` halves a stored chunk
for the indexer when a server still rejects it as too long.

Token counts come from a ``TokenCounter`` (the embedder's, or ``char_count``: one token per
character). Whether a text fits is asked of the counter's ``ceiling`` first, when it has one
(``_fits``): the offline model's spares most counts of chunks well under the budget.
"""

from __future__ import annotations

from typing import Callable, Iterable

from varaverk.documents.chunks import SEP, Chunk, Draft, TokenCounter, cap_label, trim_blank_lines
from varaverk.documents.guard import checkpoint

# A context trail longer than this share of the budget is shortened (it is a label, not
# content), so that every part keeps room for real text.
_MAX_CONTEXT_SHARE = 0.5
# Smallest budget that still leaves room for a context and some text.
_MIN_BUDGET = 8


def char_count(text: str) -> int:
    """The fallback token counter: one character, one token (conservative for dense text)."""
    return len(text)


def budget_draft(path: str, kind: str, draft: Draft, count: TokenCounter,
                 max_tokens: int) -> list[Chunk]:
    """Turn one draft into one chunk, or parts 1..n when it is over the budget.

    Args:
        path, kind: the document's, copied to every chunk; the context starts with ``path``.
        draft: the chunker's draft; its blank leading and trailing lines are dropped.
        count: the token counter. max_tokens: what each chunk's ``embed_text`` may count.

    Returns:
        ``[]`` for a draft of blank lines only, else the chunk or its parts in reading order.

    Raises:
        ValueError: ``max_tokens`` below 8 (for any draft with text).
    """
    lines = trim_blank_lines(draft.lines)
    if not lines:
        return []
    context = SEP.join([path, *[cap_label(t) for t in draft.trail if t]])
    draft = Draft(cap_label(draft.section), cap_label(draft.title), draft.trail, lines,
                  draft.start_line, draft.meta, draft.part_labels)
    pieces = _budget_lines(draft, context, count, max_tokens)
    start = draft.start_line if draft.start_line is not None else lines[0][0]
    start = min(start, lines[0][0])
    if len(pieces) == 1:
        ctx, part_lines = pieces[0]
        return [Chunk(path=path, kind=kind, section=draft.section, title=draft.title,
                      start_line=start, end_line=part_lines[-1][0], text=_join(part_lines),
                      context=ctx, part=0, meta=dict(draft.meta))]
    out = []
    for i, (ctx, part_lines) in enumerate(pieces):
        label = draft.part_labels.get(part_lines[0][0]) if i else None
        if label:
            labelled = f"{ctx}{SEP}{label}"
            if _fits(count, f"{labelled}\n{_join(part_lines)}", max_tokens):
                ctx = labelled
        out.append(Chunk(path=path, kind=kind, section=draft.section, title=draft.title,
                         start_line=start if i == 0 else part_lines[0][0],
                         end_line=part_lines[-1][0], text=_join(part_lines), context=ctx,
                         part=i + 1, meta=dict(draft.meta)))
    return out


def split_chunk(chunk: Chunk, count_tokens: TokenCounter | None, max_tokens: int) -> list[Chunk]:
    """Halve a chunk, for the indexer when an embedding server rejected it as too long.

    The text is cut in two at the paragraph or line boundary nearest its middle (a single
    line is cut at its middle), the context is repeated in both halves, and each half is then
    held to ``max_tokens`` like any chunk. The line ranges of the halves are narrowed on the
    assumption that the text's last line is the chunk's ``end_line`` (true for every chunker
    here).

    Part numbers: a whole chunk (part 0) becomes parts 1..n; a part p becomes parts
    ``p * 100 + 1 .. p * 100 + n``, which keeps (path, start_line, part) unique and, sorted
    by start line, in reading order.

    Args:
        chunk: the rejected chunk.
        count_tokens: the embedder's token counter, or None for one token per character.
        max_tokens: the budget each half must also meet.

    Returns:
        Two or more chunks whose texts together hold all of ``chunk.text``; ``[chunk]`` when
        the text is a single character and cannot be halved.
    """
    count = count_tokens or char_count
    text_lines = chunk.text.split("\n")
    first = max(chunk.start_line, chunk.end_line - len(text_lines) + 1)
    numbered = [(min(first + i, chunk.end_line), line) for i, line in enumerate(text_lines)]
    halves = _halve(numbered)
    if len(halves) < 2:
        return [chunk]
    base = chunk.part * 100 if chunk.part else 0
    out: list[Chunk] = []
    for half in halves:
        draft = Draft(chunk.section, chunk.title, [], half, meta=chunk.meta)
        for piece in _budget_lines(draft, chunk.context, count, max_tokens):
            out.append(piece)
    return [
        Chunk(path=chunk.path, kind=chunk.kind, section=chunk.section, title=chunk.title,
              start_line=lines[0][0] if i else min(chunk.start_line, lines[0][0]),
              end_line=lines[-1][0], text=_join(lines), context=context, part=base + i + 1,
              meta=dict(chunk.meta))
        for i, (context, lines) in enumerate(out)
    ]


def _halve(lines: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """Cut numbered lines in two near the middle (by characters), preferring a blank line."""
    total = sum(len(t) + 1 for _, t in lines)
    if len(lines) == 1:
        n, t = lines[0]
        if len(t) < 2:
            return [lines]
        cut = _soft_cut(t, len(t) // 2)
        return [[(n, t[:cut])], [(n, t[cut:])]]
    best, best_score = None, None
    pos = 0
    for i in range(1, len(lines)):
        pos += len(lines[i - 1][1]) + 1
        # Distance from the middle, with blank-line boundaries preferred within a margin.
        score = abs(pos - total / 2) - (total / 8 if not lines[i][1].strip() else 0)
        if best_score is None or score < best_score:
            best, best_score = i, score
    halves = [part for part in (trim_blank_lines(lines[:best]),
                                trim_blank_lines(lines[best:])) if part]
    if len(halves) == 1 and len(halves[0]) == 1:  # one line with blank lines around it
        return _halve(halves[0])
    return halves


def _soft_cut(text: str, limit: int) -> int:
    """A cut position <= limit, moved back to just after white space when some lies nearby."""
    if limit >= len(text):
        return len(text)
    space = text.rfind(" ", max(1, limit - 40), limit)
    return space + 1 if space > 0 else max(1, limit)


def _join(lines: Iterable[tuple[int, str]]) -> str:
    return "\n".join(t for _, t in lines)


def _budget_lines(draft: Draft, context: str, count: TokenCounter,
                  max_tokens: int) -> list[tuple[str, list[tuple[int, str]]]]:
    """Split a draft's lines into pieces whose ``context + "\\n" + text`` fit ``max_tokens``.

    Returns ``(context, lines)`` pairs; the context may have been shortened when it alone
    would take more than half the budget.
    """
    if max_tokens < _MIN_BUDGET:
        raise ValueError(f"max_tokens must be at least {_MIN_BUDGET}, got {max_tokens}")
    lines = draft.lines
    if _fits(count, f"{context}\n{_join(lines)}", max_tokens):
        return [(context, lines)]
    context = _fit_context(context, count, int(max_tokens * _MAX_CONTEXT_SHARE))
    overhead = count("")  # special tokens a counter adds to every call ([CLS], [SEP])
    # Room for the longest part label any part could get, so labels are never crowded out.
    labels = {draft.part_labels[n] for n, _ in lines if n in draft.part_labels}
    widest = max((f"{context}{SEP}{label}" for label in labels), key=count, default=context)
    if count(widest) > max_tokens * _MAX_CONTEXT_SHARE:
        widest = context
    budget = max_tokens - count(widest + "\n")  # what is left for the text's own tokens
    return [(context, piece) for piece in _fit(lines, widest, count, max_tokens, budget,
                                               overhead)]


def _fit(lines: list[tuple[int, str]], context: str, count: TokenCounter, max_tokens: int,
         budget: int, overhead: int) -> list[list[tuple[int, str]]]:
    """Pack lines into pieces and check each with a real count, in reading order.

    Sums of per-line counts are not exactly the count of the joined text for every
    tokenizer, so a packed piece that still overflows is packed again with a tighter budget
    (or halved once the budget is used up); every round shrinks the piece or the budget.
    """
    out: list[list[tuple[int, str]]] = []
    for piece in _pack(lines, count, max(1, budget), overhead):
        text = f"{context}\n{_join(piece)}"
        if _fits(count, text, max_tokens):
            out.append(piece)
            continue
        real = count(text)
        tighter = budget - (real - max_tokens) - 1
        if tighter >= 1:
            out.extend(_fit(piece, context, count, max_tokens, tighter, overhead))
            continue
        halves = _halve(piece)
        if len(halves) < 2:  # one character over budget: nothing left to cut
            out.append(piece)
            continue
        for half in halves:
            out.extend(_fit(half, context, count, max_tokens, budget, overhead))
    return out


def _fits(count: TokenCounter, text: str, max_tokens: int) -> bool:
    """Whether ``count(text) <= max_tokens``, asking the counter's ``ceiling`` first when it
    has one (an upper bound of the count, or None when it cannot tell): the same answer,
    mostly without counting."""
    ceiling = getattr(count, "ceiling", None)
    bound = ceiling(text) if ceiling is not None else None
    return (bound is not None and bound <= max_tokens) or count(text) <= max_tokens


def _fit_context(context: str, count: TokenCounter, limit: int) -> str:
    """Shorten an over-long context trail (a label, not content) to ``limit`` tokens."""
    if count(context) <= limit:
        return context
    lo, hi = 0, len(context)
    while lo < hi:  # largest prefix that fits, with the ellipsis
        mid = (lo + hi + 1) // 2
        if count(context[:mid] + "\u2026") <= limit:
            lo = mid
        else:
            hi = mid - 1
    return context[:lo] + "\u2026"


def _pack(lines: list[tuple[int, str]], count: TokenCounter, budget: int,
          overhead: int) -> list[list[tuple[int, str]]]:
    """Greedily pack lines into pieces of at most ``budget`` tokens.

    Lines are added while they fit. When the next line does not, the piece is cut at its last
    paragraph boundary (a blank line) if that keeps at least half a piece before the cut,
    else right before the line, so paragraphs stay whole where that costs little. A single
    line larger than a piece is hard-split by characters first (at white space when there is
    some nearby). Parts aim at an even size rather than n-1 full parts and a scrap.
    """
    def cost(text: str) -> int:
        # One token for the newline joining lines: conservative for every counter here.
        return max(0, count(text) - overhead) + 1

    costs = [cost(t) for _, t in lines]
    budget = _even_budget(sum(costs), budget)
    units = _units(lines, costs, cost, count, budget, overhead)
    pieces: list[list[tuple[int, str]]] = []
    piece: list[tuple[int, str, int]] = []
    for unit in units:
        if not unit[1].strip():
            if piece:
                piece.append(unit)
            continue
        if piece and sum(u[2] for u in piece) + unit[2] > budget:
            done, piece = _cut_piece(piece, budget)
            pieces.append(done)
            if piece and sum(u[2] for u in piece) + unit[2] > budget:
                pieces.append([(n, t) for n, t, _ in piece])
                piece = []
        piece.append(unit)
    if piece:
        pieces.append([(n, t) for n, t, _ in piece])
    return [trimmed for trimmed in (trim_blank_lines(p) for p in pieces) if trimmed]


def _even_budget(total: int, budget: int) -> int:
    """A per-piece budget that makes the parts about even (never above ``budget``)."""
    parts = -(-total // budget)
    if parts > 1:
        return min(budget, -(-total // parts) + max(1, budget // 8))
    return budget


def _units(lines: list[tuple[int, str]], costs: list[int], cost: Callable[[str], int],
           count: TokenCounter, budget: int,
           overhead: int) -> list[tuple[int, str, int]]:
    """(line number, text, cost) per line; a line over ``budget`` hard-split into several."""
    units: list[tuple[int, str, int]] = []
    for (number, text), c in zip(lines, costs):
        if c <= budget:
            units.append((number, text, c))
        else:
            units.extend((number, fragment, c)
                         for fragment, c in _hard_split(text, count, budget, overhead))
    return units


def _cut_piece(piece: list[tuple[int, str, int]],
               budget: int) -> tuple[list[tuple[int, str]], list[tuple[int, str, int]]]:
    """Close a full piece: at its last blank line when at least half a piece comes before
    it, else whole. Returns (the closed piece's lines, the units carried into the next one,
    leading blank lines dropped)."""
    cut = len(piece)
    for k in range(len(piece) - 1, 0, -1):
        if not piece[k][1].strip():
            if sum(u[2] for u in piece[:k]) * 2 >= budget:
                cut = k
            break
    rest = piece[cut:]
    while rest and not rest[0][1].strip():
        rest.pop(0)
    return [(n, t) for n, t, _ in piece[:cut]], rest


# A hard-split fragment is accepted once it fills this share of the budget; it is grown
# towards the budget while it fills less (at most _SPLIT_TRIES counts per fragment).
_SPLIT_FILL = 0.95
_SPLIT_TRIES = 8


def _hard_split(text: str, count: TokenCounter, budget: int,
                overhead: int) -> list[tuple[str, int]]:
    """Cut one over-long line into fragments of at most ``budget`` tokens each.

    Returns ``(fragment, cost)`` pairs, the cost as ``_pack`` counts it. Each fragment's
    length is aimed at the budget from the characters per token seen so far, counted, then
    shrunk (over the budget) or grown (under ``_SPLIT_FILL`` of it) by the ratio of budget
    to count, ending just after white space when some is near. Only text about as long as
    one fragment is ever counted, a few times at most, so a line costs time linear in its
    length. Every fragment holds at least one character, so this ends.
    """
    out: list[tuple[str, int]] = []
    start, end = 0, len(text)
    per_token = 1.0  # characters per token: a first guess (dense text), then what was seen
    while start < end:
        checkpoint()
        cut, cost = _next_fragment(text, start, count, budget, overhead, per_token)
        out.append((text[start:start + cut], cost))
        per_token = cut / max(1, cost - 1)
        start += cut
    return out


def _next_fragment(text: str, start: int, count: TokenCounter, budget: int, overhead: int,
                   per_token: float) -> tuple[int, int]:
    """``(length, cost)`` of the fragment of ``text`` starting at ``start`` (see
    ``_hard_split``): the longest fitting length tried, else one character."""
    rest = len(text) - start
    good, bad = 0, rest + 1  # longest length known to fit; shortest known not to
    best = None
    room = max(1, budget - 1)  # tokens for the text: a piece's cost adds one for its newline
    want = int(per_token * room)
    for _ in range(_SPLIT_TRIES):
        want = max(good + 1, min(want, bad - 1, rest))
        length = want if want >= rest else _soft_cut(text[start:start + want + 1], want)
        if length <= good:  # backs off to the white space already found: that is the cut
            break
        cost = max(0, count(text[start:start + length]) - overhead) + 1
        if cost <= budget:
            good, best = length, (length, cost)
            if length >= rest or cost >= _SPLIT_FILL * budget:
                break
        else:
            bad = length
        if bad - good <= 1:
            break
        want = int(length * room / max(1, cost - 1) * (1.0 if cost <= budget else 0.97))
    return best or (1, max(0, count(text[start:start + 1]) - overhead) + 1)
