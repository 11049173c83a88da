"""Prompt building: system prompt, history, labelled context within a budget, the question.

The one home of what a model is told. ``ai-query`` and the dock both reach it through the worker
(``varaverk.answering.answer.run_turn``), never with a second copy.

Message layout (``build_messages``), as a list of ``{"role", "content"}``:

1. ``system``: the profile's editable system prompt
   (``AI/varaverk/answering/system_prompts/<profile>.md``) and, for profiles that answer from
   documents, ``ANSWER_RULES`` (answer only from the context, cite each claim with its label,
   say what the context does not cover).
2. the last ``profile.history_turns`` user/assistant turns of the conversation, oldest first,
   assistant turns holding only answers (never reasoning).
3. ``user``: the context blocks (capability evidence first, then documentation excerpts laid
   out by ``varaverk.retrieval.context.format_context``, each introduced by its label
   ``[path › SECTION › title]``), then the question.

The context budget is in characters (about 4 per token): ``context_budget(settings)`` gives
half of the model's context window (``AI_GEN_NUM_CTX``) to excerpts, capped at 16,000
characters, so the system prompt, history and answer keep room.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence


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


def context_budget(settings: Any) -> int:
    """Characters of documentation context for one prompt: half the model window, capped."""
    window = settings.ai_gen_num_ctx or 8192
    return max(MIN_CONTEXT_CHARS, min(MAX_CONTEXT_CHARS, window * CHARS_PER_TOKEN // 2))


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
                   answers_from_documents: bool = True, summaries: str = ""
                   ) -> list[dict[str, str]]:
    """The chat messages for one turn.

    Args:
        system_prompt: the profile's system prompt (``Profile.system_prompt()``).
        question: the user's question as they wrote it (not the rewritten search query).
        history: earlier messages ``{"role", "content"}``; trimmed to ``history_turns``.
        history_turns: the profile's history depth.
        context: labelled documentation excerpts
            (``varaverk.retrieval.context.format_context``); may be empty.
        evidence: capability blocks (log excerpts, live health...) placed before the excerpts.
        answers_from_documents: add ``ANSWER_RULES`` to the system prompt (retrieval profiles).
        summaries: a section of document summaries after the excerpts
            (``varaverk.answering.summary_context.summary_block``); the excerpts are then
            introduced as verbatim.

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
        heading = "Documentation excerpts (verbatim):" if summaries.strip() else \
            "Documentation excerpts:"
        if context.strip():
            parts.append(f"{heading}\n\n" + context.strip())
        if summaries.strip():
            parts.append(summaries.strip())
        if not (context.strip() or summaries.strip()):
            parts.append("Documentation excerpts: (none found)")
    parts.append(f"Question: {question.strip()}" if parts else question.strip())
    return [
        {"role": "system", "content": system},
        *trim_history(history, history_turns),
        {"role": "user", "content": "\n\n".join(parts)},
    ]
