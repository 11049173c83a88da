"""Recall: which stored triplets a new exchange brings back, by votes.

The new triplet (the last turns of the current conversation and the new question) is
digested extractively; each of its facts finds its nearest stored facts by cosine
similarity, and each hit at or above ``MIN_SIMILARITY`` is one vote for the triplet the
stored fact came from: one vote per new fact and triplet (a triplet repeating itself gains
nothing), for the ``NEIGHBOURS`` nearest distinct triplets of each new fact. Triplets of
the current conversation never vote: they are in the prompt already. Ranked by votes, ties
by summed similarity. The first is *hot* (quoted verbatim);
the next ``ECHOES`` are *echoes* (their recollections only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from varaverk.memory.digest import Fact, extractive_digest
from varaverk.memory.triplets import Turn

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from varaverk.memory.store import FactTable, MemoryStore

NEIGHBOURS = 5
# Cosine similarity below which a stored fact is not "about" the new one. 0.3 is where
# all-MiniLM-L6-v2 separates paraphrases from unrelated sentences of the same domain
# (sentence-transformers' own semantic-search examples); it also keeps an unanswerable
# question from recalling anything.
MIN_SIMILARITY = 0.3
ECHOES = 3
# Facts looked at per vote cast: a triplet holds about six facts (two sentences a turn), so
# eight per vote finds ``NEIGHBOURS`` distinct triplets unless one conversation repeats itself.
CANDIDATES_PER_VOTE = 8


@dataclass
class Recalled:
    """One recalled triplet.

    Attributes:
        triplet_id, conversation: where it is stored.
        votes: hits it received; similarity: their summed cosine similarity.
        turns: its turns (verbatim, as stored); facts; recollection.
        hot: the first of the recall (quoted verbatim), else an echo.
    """

    triplet_id: int
    conversation: str
    votes: int
    similarity: float
    turns: list[Turn] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    recollection: str = ""
    hot: bool = False

    @property
    def said_at(self) -> str:
        return self.turns[0].said_at if self.turns else ""

    def as_dict(self) -> dict:
        """JSON-ready: ids, votes, turn refs and texts, facts, recollection."""
        return {"triplet": self.triplet_id, "conversation": self.conversation,
                "votes": self.votes, "similarity": round(self.similarity, 4), "hot": self.hot,
                "said_at": self.said_at,
                "turns": [{"id": t.turn_ref, "speaker": t.speaker, "said_at": t.said_at,
                           "text": t.text} for t in self.turns],
                "facts": [{"statement": f.statement, "speaker": f.speaker, "type": f.type}
                          for f in self.facts],
                "recollection": self.recollection}


def new_facts(question: str, recent: list[Turn]) -> list[str]:
    """The statements of the new triplet: the last two ``recent`` turns and ``question``."""
    tail = list(recent[-2:])
    asked_at = tail[-1].said_at if tail else ""
    tail.append(Turn("", len(tail), "", "user", "user", asked_at, question))
    return [f.statement for f in extractive_digest(tail).facts]


def vote(table: "FactTable", queries: "np.ndarray", exclude: str | None = None,
         neighbours: int = NEIGHBOURS, floor: float = MIN_SIMILARITY
         ) -> list[tuple[int, int, float]]:
    """``(triplet_id, votes, summed similarity)``, best first.

    ``queries``: float32 ``(m, dim)`` L2-normalised vectors of the new facts; ``exclude``: a
    conversation whose facts do not vote. One matrix product, then a partial sort per row.
    """
    import numpy as np

    if table.matrix.shape[0] == 0 or len(queries) == 0:
        return []
    # float32 like the matrix: a float64 query would convert the whole matrix on every call.
    queries = np.asarray(queries, dtype=np.float32)
    # (m, n) cosine similarities; the tall product reads the matrix in its own order, which
    # BLAS does markedly faster than the transposed one.
    sims = np.ascontiguousarray((table.matrix @ queries.T).T)
    if exclude in table.codes:
        sims[:, table.conversations == table.codes[exclude]] = -1.0
    tally: dict[int, list] = {}
    for row in range(len(sims)):
        best: dict[int, float] = {}
        for col in _nearest(sims[row], neighbours * CANDIDATES_PER_VOTE, floor):
            if len(best) == neighbours:
                break
            best.setdefault(int(table.triplet_ids[col]), float(sims[row, col]))
        for tid, score in best.items():
            entry = tally.setdefault(tid, [0, 0.0])
            entry[0] += 1
            entry[1] += score
    ranked = sorted(tally.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))
    return [(tid, votes, total) for tid, (votes, total) in ranked]


def _nearest(scores: "np.ndarray", limit: int, floor: float) -> "np.ndarray":
    """Column indices of the ``limit`` highest ``scores`` at or above ``floor``, best first.

    A triplet holds several facts: ``limit`` (CANDIDATES_PER_VOTE facts per vote) is enough
    to find the ``neighbours`` nearest distinct triplets. Only the few facts above the floor
    are partitioned and sorted, not the whole row: the same facts, in the same order, as a
    partial sort of every score would give, in a fraction of the time.
    """
    import numpy as np

    above = np.flatnonzero(scores >= floor)
    if len(above) > limit:
        above = above[np.argpartition(scores[above], len(above) - limit)[-limit:]]
    return above[np.argsort(-scores[above], kind="stable")]


def recall(store: "MemoryStore", embedder, question: str, recent: list[Turn] = (),
           exclude: str | None = None, limit: int = 1 + ECHOES) -> list[Recalled]:
    """The triplets ``question`` brings back (hot first, then echoes), at most ``limit``.

    ``embedder``: a ``varaverk.embedding.Embedder`` (checked against the store's);
    ``recent``: the current conversation's last turns; ``exclude``: its id.
    Raises MemoryMismatch when the stored facts came from another embedder.
    """
    table = store.fact_table()
    if table.matrix.shape[0] == 0:
        return []
    store.check_embedder(embedder.backend, embedder.model)
    queries = _embed(embedder, new_facts(question, list(recent)))
    out = []
    for tid, votes, total in vote(table, queries, exclude)[:limit]:
        row = store.triplet(tid)
        if row is None:
            continue
        out.append(Recalled(tid, row.conversation, votes, total,
                            store.turns(row.conversation, row.first_seq, row.last_seq),
                            store.facts(tid), store.recollection(tid), hot=not out))
    return out


def _embed(embedder, texts: list[str]) -> "np.ndarray":
    import numpy as np

    result = embedder.embed(texts)
    vectors = [v for v in result.vectors if v is not None]
    return np.vstack(vectors) if vectors else np.zeros((0, 1), np.float32)
