"""Memory evaluation: does recall bring back the turns a later question needs?

A dev set (``load_dev_set``) has the shape of LoCoMo and LongMemEval: dated sessions of turns
with ids, and later questions whose evidence is named turn ids, each of a category
(``single-hop``, ``multi-hop``, ``temporal``, ``unanswerable``). Every session is remembered
as a conversation of a fresh memory and digested; each question is then asked from a new
conversation, and three methods rank the stored triplets:

* ``votes``: memory's recall (``varaverk.memory.recall.vote``);
* ``nearest``: plain nearest neighbour over turns (cosine of the question and each turn);
* ``bm25``: FTS5 BM25 over turns;

a triplet scoring as its best turn for the two baselines, so all three rank the same units.
Evidence recall@k is the share of a question's evidence turns inside the top k triplets,
averaged over the answerable questions (per category too). For unanswerable questions,
``recalled`` is the share for which the method brought back anything (lower is better: the
baselines always return something).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from varaverk.memory.recall import new_facts, vote

CATEGORIES = ("single-hop", "multi-hop", "temporal", "unanswerable")
METHODS = ("votes", "nearest", "bm25")
KS = (1, 5)


@dataclass
class DevSet:
    """``sessions``: ``[{"id", "date", "turns": [{"id", "speaker", "text"}]}]``;
    ``questions``: ``[{"id", "question", "category", "evidence": [turn ids]}]``."""

    name: str
    sessions: list[dict]
    questions: list[dict]


def load_dev_set(path: str | Path) -> DevSet:
    """Read and check a dev set file; raises ValueError naming the first fault."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("sessions"), list) \
            or not isinstance(data.get("questions"), list):
        raise ValueError(f"{path}: a dev set is an object with sessions and questions lists")
    ids = {t["id"] for s in data["sessions"] for t in s["turns"]}
    for q in data["questions"]:
        if q.get("category") not in CATEGORIES:
            raise ValueError(f"{path}: question {q.get('id')}: category must be one of "
                             f"{', '.join(CATEGORIES)}")
        missing = [e for e in q.get("evidence", []) if e not in ids]
        if missing or (q["category"] != "unanswerable") != bool(q.get("evidence")):
            raise ValueError(f"{path}: question {q['id']}: evidence {missing or 'missing'}")
    return DevSet(data.get("name") or Path(path).stem, data["sessions"], data["questions"])


def session_turns(session: dict) -> list[dict]:
    """A session's turns as ``HostMemory.remember`` takes them (a minute apart from 10:00)."""
    return [{"speaker": t["speaker"], "role": "assistant" if t["speaker"] == "assistant"
             else "user", "said_at": f"{session['date']}T10:{i % 60:02d}:00", "text": t["text"],
             "turn_ref": t["id"]} for i, t in enumerate(session["turns"])]


@dataclass
class Scores:
    """Per method: category → list of per-question values (recall@k or recalled)."""

    values: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    def add(self, method: str, key: str, value: float) -> None:
        self.values.setdefault(method, {}).setdefault(key, []).append(value)

    def table(self) -> dict[str, dict[str, float]]:
        return {m: {k: round(sum(v) / len(v), 3) for k, v in sorted(groups.items())}
                for m, groups in self.values.items()}


def _recall_at(ranked: list[int], refs: dict[int, set[str]], evidence: set[str], k: int
               ) -> float:
    covered = set().union(*(refs.get(t, set()) for t in ranked[:k])) if ranked else set()
    return len(evidence & covered) / len(evidence)


def _turn_rankings(memory, question: str, qvec, triplet_of: dict[str, list[int]],
                   turn_vecs, turn_refs: list[str]) -> dict[str, list[int]]:
    """The baselines' triplet rankings: each triplet scored as its best turn."""
    def by_best(scores: dict[str, float]) -> list[int]:
        best: dict[int, float] = {}
        for ref, score in scores.items():
            for tid in triplet_of.get(ref, []):
                best[tid] = max(best.get(tid, float("-inf")), score)
        return [t for t, _ in sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))]

    cosines = turn_vecs @ qvec
    lexical = {t.turn_ref: score for t, score in memory.store.search_turns(question, 200)}
    return {"nearest": by_best(dict(zip(turn_refs, cosines.tolist()))),
            "bm25": by_best(lexical)}


def evaluate(memory, dev: DevSet) -> dict:
    """Remember ``dev``'s sessions in ``memory`` (an empty ``HostMemory``), digest them and
    score every question. Returns ``{"questions", "triplets", "methods": {method: {key:
    value}}, "per_question": [...]}`` with keys ``recall@1``/``recall@5`` overall and per
    category, and ``recalled`` for unanswerable questions."""
    import numpy as np

    for session in dev.sessions:
        memory.remember(session["id"], session_turns(session))
    memory.digest_pending()
    rows = memory.store.triplets()
    refs = {r.id: {t.turn_ref for t in memory.store.turns(r.conversation, r.first_seq,
                                                           r.last_seq)} for r in rows}
    triplet_of: dict[str, list[int]] = {}
    for tid, turn_refs in refs.items():
        for ref in turn_refs:
            triplet_of.setdefault(ref, []).append(tid)
    turns = [t for s in dev.sessions for t in memory.store.turns(s["id"])]
    embedder = memory.embedder
    turn_vecs = np.vstack(embedder.embed([t.text for t in turns]).vectors)
    table, scores, per_question = memory.store.fact_table(), Scores(), []
    for q in dev.questions:
        queries = np.vstack(embedder.embed(new_facts(q["question"], [])).vectors)
        ranked = {"votes": [t for t, _, _ in vote(table, queries)]}
        ranked.update(_turn_rankings(memory, q["question"], embedder.embed_query(q["question"]),
                                     triplet_of, turn_vecs, [t.turn_ref for t in turns]))
        per_question.append({"id": q["id"], "category": q["category"],
                             "top": {m: ranked[m][:5] for m in METHODS}})
        for method in METHODS:
            if q["category"] == "unanswerable":
                scores.add(method, "recalled", float(bool(ranked[method])))
                continue
            for k in KS:
                value = _recall_at(ranked[method], refs, set(q["evidence"]), k)
                scores.add(method, f"recall@{k}", value)
                scores.add(method, f"{q['category']} recall@{k}", value)
    return {"name": dev.name, "questions": len(dev.questions), "triplets": len(rows),
            "methods": scores.table(), "per_question": per_question}
