"""The context of a prompt: retrieved chunks laid out as labelled excerpts within a budget.

Each group of chunks (one hit, ``Retriever.expand`` output) becomes one excerpt introduced by
its label ``[path › SECTION › title]``, once: an excerpt of several titled pieces is labelled
``[path › SECTION]`` and each piece opens with a ``› title`` line, as a heading would in the
document. The model cites those labels (``varaverk.answering.prompts.ANSWER_RULES``), and
``varaverk.retrieval.windows`` counts a context's size on this same layout, so a context packed
within a budget is never cut.
"""

from __future__ import annotations

from itertools import groupby
from typing import Any, Sequence

from varaverk.documents.chunks import SEP

SUBTITLE = "\u203a "  # opens the line naming a titled run inside a group (group_block)


def _trail(chunk: Any) -> tuple[str, ...]:
    """A chunk's citation as its parts: path, SECTION, title (empty parts left out)."""
    return tuple(p for p in (chunk.path, chunk.section, chunk.title) if p)


def group_block(group: Sequence[Any]) -> str:
    """One group's excerpt as ``format_context`` lays it out.

    The group is one passage of one file, labelled once: by its chunks' shared citation, or,
    when their titles differ, by the part of the citation they share (``[path › SECTION]``),
    with each run of chunks introduced by the rest of its own citation (``› title``), where a
    heading stood in the document. The model cites the label; every part of it names the
    file and section it was handed.

    Args:
        group: chunks of one hit, in the order to show them (``Retriever.expand`` gives them
            in line order); not empty.
    """
    trails = [_trail(c) for c in group]
    shared = trails[0]
    for t in trails[1:]:
        n = 0
        while n < min(len(shared), len(t)) and shared[n] == t[n]:
            n += 1
        shared = shared[:n]
    if not shared:  # chunks of several files: each run under its own whole label
        return "\n\n".join(group_block(list(run))
                           for _, run in groupby(group, key=lambda c: c.path))
    head = f"[{SEP.join(shared)}]"
    lines = [head]
    last = shared
    for chunk, trail in zip(group, trails):
        if trail != last:
            # The rest of the chunk's citation where its heading stood; a chunk of the shared
            # citation itself after a titled one is introduced by the label again.
            lines.append(f"{SUBTITLE}{SEP.join(trail[len(shared):])}" if trail != shared
                         else head)
            last = trail
        lines.append(chunk.text.rstrip())
    return "\n".join(lines)


def format_context(groups: Sequence[Sequence[Any]], budget_chars: int) -> tuple[str, list[Any]]:
    """Lay retrieved chunks out as labelled excerpts within ``budget_chars``.

    Args:
        groups: one list of chunks per hit, best hit first (``Retriever.expand`` output, or
            ``[[hit.chunk] for hit in hits]``). Each group is labelled once
            (``group_block``).
        budget_chars: the most characters of excerpt text (labels included) to emit. A group
            that does not fit whole is cut at a line boundary, marked ``[…]``; later groups are
            dropped.

    Returns:
        (context text, the chunks actually included, in order).
    """
    blocks: list[str] = []
    used: list[Any] = []
    total = 0
    for group in groups:
        if not group:
            continue
        block = group_block(group)
        room = budget_chars - total - (2 if blocks else 0)
        if room <= len(group[0].path) + 40:
            break
        if len(block) > room:
            cut = block[:room]
            cut = cut[: cut.rfind("\n")] if "\n" in cut else cut
            block = cut.rstrip() + "\n[…]"
            blocks.append(block)
            used.extend(group)
            break
        blocks.append(block)
        used.extend(group)
        total += len(block) + (2 if len(blocks) > 1 else 0)
    return "\n\n".join(blocks), used
