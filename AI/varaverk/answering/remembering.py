"""The ``memory`` capability in a turn: recall before the prompt, remember after the answer.

``recall_for_turn`` runs for a profile holding ``memory`` (``chat`` and ``notes``; never
``varaverk``) when ``AI_MEMORY_ENABLED`` is true: the question and the conversation's last
turns recall stored triplets (``varaverk.memory``), which become one prompt block quoted as
data, and a list of what was recalled for the answer to show ("remembered from 2026-03-02 …").
``remember_turn`` stores a finished exchange and digests it; callers run it after the answer
has streamed and been saved (the dock in a background thread), never before.

Memory never costs an answer: a failure to recall or remember is logged and the turn goes on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from varaverk.answering.profiles import MEMORY

log = logging.getLogger("varaverk.answering.remembering")


@dataclass
class Remembered:
    """What a turn recalled: ``block`` for the prompt ("" when nothing) and ``recalled``,
    one dict per triplet in the block: ``triplet``, ``conversation``, ``said_at``, ``votes``,
    ``hot``, ``turns`` (ids), ``label`` ("remembered from 2026-03-02: …")."""

    block: str = ""
    recalled: list[dict] = field(default_factory=list)


def wants_memory(profile, settings) -> bool:
    """Whether a turn of ``profile`` recalls and is remembered."""
    return bool(getattr(settings, "ai_memory_enabled", False)) and profile.holds(MEMORY)


def _recent(history: list[dict]):
    from varaverk.memory.triplets import Turn
    clean = [m for m in history or [] if isinstance(m, dict)
             and m.get("role") in ("user", "assistant") and isinstance(m.get("content"), str)]
    return [Turn("", i, "", m["role"], m["role"], "", m["content"])
            for i, m in enumerate(clean[-2:])]


def _summary(r) -> dict:
    first = r.turns[0].text if r.turns else r.recollection
    text = " ".join(first.split())
    label = f"remembered from {r.said_at[:10]}: {text[:117] + '…' if len(text) > 120 else text}"
    return {"triplet": r.triplet_id, "conversation": r.conversation, "said_at": r.said_at,
            "votes": r.votes, "hot": r.hot, "turns": [t.turn_ref for t in r.turns],
            "label": label}


def recall_for_turn(profile, request, settings, embedder=None) -> Remembered:
    """The memory block and summaries for one turn (empty when the profile does not hold
    ``memory``, memory is off, or recall failed). ``request``: a ``TurnRequest``
    (``question``, ``history``, ``conversation``); ``embedder``: the retriever's, to share."""
    if not wants_memory(profile, settings):
        return Remembered()
    profile.require(MEMORY)
    from varaverk.memory.host_memory import HostMemory  # numpy and the store: on need
    try:
        with HostMemory(settings, embedder=embedder) as memory:
            recalled = memory.recall(request.question, getattr(request, "conversation", None),
                                     _recent(request.history))
            block, used = memory.block(recalled)
    except Exception as exc:  # memory must never cost the answer
        log.warning("memory not recalled: %s", exc)
        return Remembered()
    return Remembered(block, [_summary(r) for r in used])


def remember_turn(settings, profile, conversation: str, question: str, answer: str,
                  asked_at: str, answered_at: str, embedder=None) -> int:
    """Store one exchange of ``conversation`` and digest what is pending; returns the turns
    stored (0 when the profile does not hold ``memory``, memory is off, or it failed)."""
    if not (wants_memory(profile, settings) and conversation and answer.strip()):
        return 0
    from varaverk.memory.host_memory import HostMemory
    try:
        with HostMemory(settings, embedder=embedder) as memory:
            added = memory.remember(conversation, [
                {"speaker": "user", "role": "user", "said_at": asked_at, "text": question},
                {"speaker": "assistant", "role": "assistant", "said_at": answered_at,
                 "text": answer}])
            memory.digest_pending()
    except Exception as exc:
        log.warning("turn not remembered: %s", exc)
        return 0
    return len(added)
