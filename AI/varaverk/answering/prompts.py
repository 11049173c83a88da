"""Prompt building: system prompt, history, labelled context within a budget, the question.

The one home of what a model is told. ``ai-query`` and the dock both reach it through the worker
(``varaverk.answering.answer.run_turn``), never with a second copy.

Message layout (``build_messages``), as a list of ``{"role", "content"}``:

1. ``system``: the profile's editable system prompt (``AI/varaverk/answering/system_prompts/<profile>.md``) and, for
   profiles that answer from documents, ``ANSWER_RULES`` (answer only from the context, cite
   each claim with its label, say what the context does not cover).
2. the last ``profile.history_turns`` user/assistant turns of the conversation, oldest first,
   assistant turns holding only answers (never reasoning).
3. ``user``: the context blocks (capability evidence first, then documentation excerpts, each
   introduced by its label ``[path › SECTION › title]``, once per excerpt: an excerpt of
   several titled pieces is labelled ``[path › SECTION]`` and each piece opens with a
   ``› title`` line, as a heading would in the document), then the question.

The context budget is in characters (about 4 per token): ``context_budget(settings)`` gives
half of the model's context window (``AI_GEN_NUM_CTX``) to excerpts, capped at 16,000
characters, so the system prompt, history and answer keep room.
"""

from __future__ import annotations

from itertools import groupby
from typing import Any, Iterable, Sequence

from varaverk.documents.chunks import SEP


CHARS_PER_TOKEN = 4
MAX_CONTEXT_CHARS = 16000
MIN_CONTEXT_CHARS = 2000

ANSWER_RULES = """\
How to answer:
- Answer only from the context excerpts in the user's message. Each excerpt starts with its
  label in square brackets, e.g. [Backup/rsync_mirror.sh › CONFIGURATION › MIRROR_MAX_DELETE_PCT].
- Cite every claim with the label of the excerpt it comes from, in square brackets, exactly as
  written in the context. A line starting with › inside an excerpt names the part below it.
- If the context does not answer the question, or answers only part of it, say plainly which
  part the documentation does not cover. Do not fill the gap from general knowledge."""


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


def context_budget(settings: Any) -> int:
    """Characters of documentation context for one prompt: half the model window, capped."""
    window = int(getattr(settings, "ai_gen_num_ctx", 8192) or 8192)
    return max(MIN_CONTEXT_CHARS, min(MAX_CONTEXT_CHARS, window * CHARS_PER_TOKEN // 2))


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


def trim_history(history: Iterable[dict] | None, turns: int) -> list[dict[str, str]]:
    """The last ``turns`` user+assistant exchanges of a conversation, validated.

    Messages that are not ``{"role": "user"|"assistant", "content": str}`` are dropped (stored
    conversations are replayed into prompts, so they are re-checked here). ``turns`` counts
    user messages: 0 keeps nothing.
    """
    clean = [
        {"role": m["role"], "content": m["content"]}
        for m in (history or [])
        if isinstance(m, dict) and m.get("role") in ("user", "assistant")
        and isinstance(m.get("content"), str) and m["content"].strip()
    ]
    if turns <= 0:
        return []
    kept: list[dict[str, str]] = []
    users = 0
    for m in reversed(clean):
        if m["role"] == "user":
            users += 1
            if users > turns:
                break
        kept.append(m)
    kept.reverse()
    # A prompt must not start with a dangling assistant reply.
    while kept and kept[0]["role"] == "assistant":
        kept.pop(0)
    return kept


def build_messages(system_prompt: str, question: str, *, history: Iterable[dict] | None = None,
                   history_turns: int = 0, context: str = "", evidence: Sequence[str] = (),
                   answers_from_documents: bool = True) -> list[dict[str, str]]:
    """The chat messages for one turn.

    Args:
        system_prompt: the profile's system prompt (``Profile.system_prompt()``).
        question: the user's question as they wrote it (not the rewritten search query).
        history: earlier messages ``{"role", "content"}``; trimmed to ``history_turns``.
        history_turns: the profile's history depth.
        context: labelled documentation excerpts (``format_context``); may be empty.
        evidence: capability blocks (log excerpts, live health...) placed before the excerpts.
        answers_from_documents: add ``ANSWER_RULES`` to the system prompt (retrieval profiles).

    Returns:
        [system, *history, user].
    """
    system = system_prompt.strip()
    if answers_from_documents:
        system = f"{system}\n\n{ANSWER_RULES}"
    parts: list[str] = []
    for block in evidence:
        if block and block.strip():
            parts.append(block.strip())
    if answers_from_documents:
        if context.strip():
            parts.append("Documentation excerpts:\n\n" + context.strip())
        else:
            parts.append("Documentation excerpts: (none found)")
    parts.append(f"Question: {question.strip()}" if parts else question.strip())
    return [
        {"role": "system", "content": system},
        *trim_history(history, history_turns),
        {"role": "user", "content": "\n\n".join(parts)},
    ]
