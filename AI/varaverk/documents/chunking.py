"""Chunks: the unit that is embedded, stored, scored and cited.

This module holds the ``Chunk`` record and ``chunk_document``, which dispatches a decoded
document to the chunker for its kind (script headers, Markdown, templates) and then enforces
the embedder's input budget.

The kind chunkers (``varaverk.documents.script_headers``, ``varaverk.documents.markdown_sections``,
``varaverk.documents.conf_templates``) produce ``Draft`` records: a section, a title, a context trail and
the chunk's text as numbered lines. This module turns drafts into ``Chunk`` records and splits
any draft whose ``embed_text`` would exceed the budget into parts 1..n, repeating the context in
every part and narrowing each part's line range. Nothing is ever truncated: every character of
a draft's text ends up in exactly one part (white space at part boundaries aside).

``split_chunk`` halves a stored chunk for the indexer when a server still rejects it as too
long; ``heading_path`` names a chunk by its full heading trail.

Conventions shared by every kind:
    - ``context`` is ``path › trail...`` joined with ``SEP``; for headers the trail is
      ``SECTION › title``, for Markdown the heading trail, for templates ``group › KEY``.
    - ``start_line``/``end_line`` are 1-based, inclusive, in the file as decoded (after BOM
      removal and newline normalisation, which never changes the line count).
    - A chunk's ``text`` is never empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

SEP = " \u203a "  # " › " joins the context trail: path › SECTION › title

KINDS = ("header", "readme", "manual", "template", "doc", "note", "org", "chat")

TokenCounter = Callable[[str], int]

# A context trail longer than this share of the budget is shortened (it is a label, not
# content), so that every part keeps room for real text.
_MAX_CONTEXT_SHARE = 0.5
# Smallest budget that still leaves room for a context and some text.
_MIN_BUDGET = 8


@dataclass(frozen=True)
class Chunk:
    """One retrievable piece of documentation.

    Attributes:
        path: repository-relative path (as ``git ls-files -z`` gives it).
        kind: header | readme | manual | template | doc.
        section: the header section (``OPERATIONAL SAFEGUARDS``), the template group, or for
            Markdown the heading trail above the nearest heading joined with `` > ``
            (``Deploy Guide > Steps`` for a chunk under ``### Substep``); empty when none.
        title: the named paragraph (``MOVER_STOP_TIMEOUT``), the template key, or the nearest
            Markdown heading's text (no ``#``s, trimmed); empty for a section's lead prose.
        start_line, end_line: 1-based inclusive line range in the decoded file.
        text: the verbatim text shown to users and handed to the model.
        context: the trail ``path › section › title`` (or the heading trail) that is embedded
            with the text so a chunk knows where it belongs.
        part: 0 for a whole chunk; 1..n when an over-budget chunk was split.
        meta: extra metadata (front matter, property drawers), never embedded; its
            ``keywords`` list (tags, aliases) is indexed for lexical search only.
        source: the named source the chunk comes from (``repo``, the homelab repository, or a
            name from ``AI_SOURCES``; see ``varaverk.named_sources``).
    """

    path: str
    kind: str
    section: str
    title: str
    start_line: int
    end_line: int
    text: str
    context: str
    part: int = 0
    meta: dict = field(default_factory=dict, compare=False, hash=False)
    source: str = "repo"

    @property
    def embed_text(self) -> str:
        """What the embedder sees: the context trail, a newline, then the text."""
        return f"{self.context}\n{self.text}"

    @property
    def citation(self) -> str:
        """How answers cite this chunk: ``path › SECTION › title`` with empty parts left out."""
        return SEP.join(p for p in (self.path, self.section, self.title) if p)


@dataclass
class Draft:
    """A chunk before budgeting, as the kind chunkers produce it.

    Attributes:
        section: see ``Chunk.section``.
        title: see ``Chunk.title``.
        trail: context elements after the path (``["CONFIGURATION", "MOVER_STOP_TIMEOUT"]``).
        lines: the chunk text as ``(line_number, text)`` pairs, 1-based file line numbers,
            in order; the chunk text is the texts joined with newlines.
        start_line: first line of the chunk's range when it begins before its first text line
            (a Markdown heading whose body is the text); None means the first text line.
        meta: metadata copied to every part (front matter).
        part_labels: for a part of a split draft that starts at line N, ``part_labels[N]``
            is appended to that part's context: where inside a long block the part begins
            (the YAML key path ``birdseye > layout`` inside a reference config), which the
            part's own text no longer shows.
    """

    section: str
    title: str
    trail: list[str]
    lines: list[tuple[int, str]]
    start_line: int | None = None
    meta: dict = field(default_factory=dict)
    part_labels: dict[int, str] = field(default_factory=dict)


HEADING_JOIN = " > "  # joins a Markdown heading trail inside ``section``
MARKDOWN_KINDS = ("readme", "manual", "doc", "note", "org")  # heading trails as sections


def heading_path(chunk) -> str:
    """The full heading path of a chunk: ``section > title`` (``Deploy Guide > Steps``)."""
    return HEADING_JOIN.join(p for p in (chunk.section, chunk.title) if p)


def normalise_text(text: str) -> str:
    """Strip one leading U+FEFF and turn CRLF and lone CR into LF.

    The sources module already does this; repeating it here is cheap and keeps the chunkers
    safe when called directly.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def char_count(text: str) -> int:
    """The fallback token counter: one character, one token (conservative for dense text)."""
    return len(text)


def chunk_document(path: str, kind: str, text: str, *, max_tokens: int = 256,
                   count_tokens: TokenCounter | None = None,
                   links: dict[str, str] | None = None) -> list[Chunk]:
    """Cut one decoded document into chunks that each fit the embedder's budget.

    Args:
        path: repository-relative path, used in every chunk's context and citation.
        kind: header | readme | manual | doc (Markdown) | template | note (Obsidian
            Markdown) | org (org-mode) | chat (a chat export).
        text: the decoded file; a leading BOM and CR/CRLF line ends are normalised here too.
        max_tokens: the embedder's input budget; every chunk's ``embed_text`` counts at most
            this many tokens with ``count_tokens``.
        count_tokens: the embedder's token counter; None counts one token per character,
            which is conservative for YAML, banners and other dense text.
        links: for notes (kinds note, org), link target -> title (``note_links.link_titles``),
            used to write ``[[links]]`` as their targets' titles; None: links keep their text.

    Returns:
        The chunks in file order; ``[]`` for a script without a header comment (or with only
        a trivial one) and for a document without any text.

    Raises:
        ValueError: an unknown kind, or a budget below 8 tokens.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown document kind {kind!r}; expected one of {', '.join(KINDS)}")
    text = normalise_text(text)
    count = count_tokens or char_count
    if kind == "chat":
        # Chats are cut into runs of messages by the chunker itself (each run's time span is
        # its title), so it budgets with the embedder's own counter.
        from varaverk.documents.chat_exports import chat_drafts
        drafts = chat_drafts(path, text, count, max_tokens)
    elif kind in ("note", "org"):
        from varaverk.documents.note_links import note_drafts
        drafts = note_drafts(path, kind, text, links or {})
    else:
        drafts = _chunker_for(kind, path)(path, text)
    chunks: list[Chunk] = []
    for draft in drafts:
        chunks.extend(_budget(path, kind, draft, count, max_tokens))
    return chunks


def _chunker_for(kind: str, path: str) -> Callable[[str, str], list[Draft]]:
    # Imported here because the kind chunkers build on this module's Draft record.
    if kind == "header":
        from varaverk.documents.script_headers import header_drafts
        return header_drafts
    if kind == "template":
        from varaverk.documents.conf_templates import template_drafts
        return template_drafts
    if path.lower().endswith(".rst"):
        from varaverk.documents.rst_sections import rst_drafts
        return rst_drafts
    from varaverk.documents.markdown_sections import markdown_drafts
    return markdown_drafts


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
    halves = [part for part in (_trim(lines[:best]), _trim(lines[best:])) if part]
    if len(halves) == 1 and len(halves[0]) == 1:  # one line with blank lines around it
        return _halve(halves[0])
    return halves


def _soft_cut(text: str, limit: int) -> int:
    """A cut position <= limit, moved back to just after white space when some lies nearby."""
    if limit >= len(text):
        return len(text)
    space = text.rfind(" ", max(1, limit - 40), limit)
    return space + 1 if space > 0 else max(1, limit)


def _trim(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Drop blank lines at both ends."""
    start, end = 0, len(lines)
    while start < end and not lines[start][1].strip():
        start += 1
    while end > start and not lines[end - 1][1].strip():
        end -= 1
    return lines[start:end]


def _join(lines: Iterable[tuple[int, str]]) -> str:
    return "\n".join(t for _, t in lines)


def _budget(path: str, kind: str, draft: Draft, count: TokenCounter,
            max_tokens: int) -> list[Chunk]:
    """Turn one draft into one chunk, or parts 1..n when it is over the budget."""
    lines = _trim(draft.lines)
    if not lines:
        return []
    context = SEP.join([path, *[t for t in draft.trail if t]])
    draft = Draft(draft.section, draft.title, draft.trail, lines, draft.start_line, draft.meta,
                  draft.part_labels)
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
            if count(f"{labelled}\n{_join(part_lines)}") <= max_tokens:
                ctx = labelled
        out.append(Chunk(path=path, kind=kind, section=draft.section, title=draft.title,
                         start_line=start if i == 0 else part_lines[0][0],
                         end_line=part_lines[-1][0], text=_join(part_lines), context=ctx,
                         part=i + 1, meta=dict(draft.meta)))
    return out


def _budget_lines(draft: Draft, context: str, count: TokenCounter,
                  max_tokens: int) -> list[tuple[str, list[tuple[int, str]]]]:
    """Split a draft's lines into pieces whose ``context + "\\n" + text`` fit ``max_tokens``.

    Returns ``(context, lines)`` pairs; the context may have been shortened when it alone
    would take more than half the budget.
    """
    if max_tokens < _MIN_BUDGET:
        raise ValueError(f"max_tokens must be at least {_MIN_BUDGET}, got {max_tokens}")
    lines = draft.lines
    if count(f"{context}\n{_join(lines)}") <= max_tokens:
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
        real = count(f"{context}\n{_join(piece)}")
        if real <= max_tokens:
            out.append(piece)
            continue
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
    return [trimmed for trimmed in (_trim(p) for p in pieces) if trimmed]


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
            units.extend((number, fragment, cost(fragment))
                         for fragment in _hard_split(text, count, budget, overhead))
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


def _hard_split(text: str, count: TokenCounter, budget: int, overhead: int) -> list[str]:
    """Cut one over-long line into fragments of at most ``budget`` tokens each.

    Binary search for the longest prefix the counter accepts, then back off to white space
    when some is near the end; every fragment holds at least one character, so this ends.
    """
    out: list[str] = []
    rest = text
    while rest:
        if max(0, count(rest) - overhead) + 1 <= budget:
            out.append(rest)
            break
        lo, hi = 1, len(rest)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if max(0, count(rest[:mid]) - overhead) + 1 <= budget:
                lo = mid
            else:
                hi = mid - 1
        cut = _soft_cut(rest, lo) if lo < len(rest) else lo
        out.append(rest[:cut])
        rest = rest[cut:]
    return out
