"""Turns and triplets: what memory keeps verbatim, and how it is cut for digesting.

A *turn* is one message of a conversation. A *triplet* is up to three consecutive turns of
one conversation (user → assistant → user), so each part is digested with its context.
Consecutive triplets share one turn (``STRIDE`` 2): the user turn that closes one opens the
next, so no answer is digested without the question before it and the reaction after it.
The last triplet of a conversation may hold one or two turns; when more turns arrive it is
digested again as a whole triplet (``windows``).
"""

from __future__ import annotations

from dataclasses import dataclass

TRIPLET_SIZE = 3
STRIDE = 2
ROLES = ("user", "assistant")


@dataclass(frozen=True)
class Turn:
    """One remembered message.

    Attributes:
        conversation: the conversation's id (a dock chat id, an export's chat name).
        seq: 0-based position in the conversation.
        turn_ref: the caller's id of the turn (``s1:3``), unique in the conversation.
        speaker: who wrote it (``user``, ``assistant`` or a name from an export).
        role: ``user`` or ``assistant``.
        said_at: when, ISO 8601 (``2026-03-02T10:15:00``).
        text: the words, secrets already redacted.
    """

    conversation: str
    seq: int
    turn_ref: str
    speaker: str
    role: str
    said_at: str
    text: str

    @property
    def day(self) -> str:
        """The date part of ``said_at`` (``2026-03-02``)."""
        return self.said_at[:10]


def windows(seqs: list[int]) -> list[tuple[int, int]]:
    """The triplets of a conversation whose turns have the sorted positions ``seqs``:
    ``(first_seq, last_seq)`` pairs, ``TRIPLET_SIZE`` turns each, ``STRIDE`` apart; the last
    may be shorter. Gaps (forgotten turns) are skipped: positions, not numbers, count.

    >>> windows([0, 1, 2, 3, 4])
    [(0, 2), (2, 4)]
    >>> windows([0, 1, 2, 3])
    [(0, 2), (2, 3)]
    """
    out: list[tuple[int, int]] = []
    start = 0
    while start < len(seqs):
        end = min(start + TRIPLET_SIZE, len(seqs)) - 1
        out.append((seqs[start], seqs[end]))
        if end == len(seqs) - 1:
            break
        start += STRIDE
    return out


def transcript(turns: list[Turn]) -> str:
    """The turns as quoted lines ``[2026-03-02 10:15] user: text``, oldest first."""
    return "\n".join(f"[{t.said_at[:16].replace('T', ' ')}] {t.speaker}: {t.text}"
                     for t in turns)
