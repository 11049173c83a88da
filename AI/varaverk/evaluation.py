"""Retrieval evaluation: question files in the shared eval format, metrics, setups side by side.

Question format (one JSON object per line; ../shared/README.md)::

    {"id", "question", "shape", "gold": [{"path", "section", "title"} | {"path", "heading"}],
     "answer_contains": [...], "history": [{"role", "content"}, ...], "notes"}

The hit rule, exactly as the format defines it: a retrieved chunk *hits* when it comes from a
gold path and contains at least one ``answer_contains`` string (case-insensitive, white space
collapsed: a line break inside an answer string still matches).

Metrics (``summarise``), per shape and overall, over answerable questions (non-empty gold):

- ``recall@1``, ``recall@5``, ``recall@10``: share with a hit in the top 1/5/10;
- ``mrr``: mean of 1/rank of the first hit (0 when none in the top 10);
- ``context_hit``: share whose top chunks, concatenated best first and cut at 4,000 characters,
  hold *every* ``answer_contains`` string (case-insensitive);
- ``prompt_hit``: the same test on the context a prompt would be handed from those results
  (``Retriever.expand`` then ``context.format_context``, labels included, within 4,000
  characters); None for setups that hand no prompt context (the naive baseline);
- ``answered``: share the setup judged relevant enough to answer (its "not covered" rule
  did not fire; None for setups without one); ``refused`` = 1 − ``answered``;
- for unanswerable questions (empty gold), ``not_covered``: share answered "not covered".

Setups (``Setup``): the naive baseline (fixed 1,000-character windows with 100 characters of
overlap over every tracked text file, dense scores), dense only, lexical only (FTS5 BM25) and
ours (hybrid with routing and boosts). Every setup gets the same search query per question, so
the columns differ by retrieval alone; the follow-up rewrite is measured separately
(``rewrite`` in the report: none / model-free / model). ``macro_average`` averages corpora
with equal weight.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from varaverk.answering.rewrite import carry_subject, model_rewrite
from varaverk.documents.tracked_files import list_tracked
from varaverk.index.store.vectors import usable_rows
from varaverk.retrieval.context import format_context
from varaverk.retrieval.scoring import dense_scores, top_k

log = logging.getLogger(__name__)

CONTEXT_CHARS = 4000
KS = (1, 5, 10)
WINDOW = 1000
OVERLAP = 100


@dataclass
class Question:
    """One evaluation question (see the module docstring for the fields)."""

    id: str
    question: str
    shape: str
    gold: list[dict]
    answer_contains: list[str]
    history: list[dict] = field(default_factory=list)
    notes: str = ""

    @property
    def answerable(self) -> bool:
        """Whether the question has a gold location (unanswerable ones have none)."""
        return bool(self.gold)

    @property
    def gold_paths(self) -> set[str]:
        """The repository paths of the gold locations (entries without a path are left out)."""
        return {g["path"] for g in self.gold if g.get("path")}


def load_questions(path: str | Path) -> list[Question]:
    """Read a question file. Raises ValueError naming the line of a malformed entry."""
    out = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            out.append(Question(id=str(d["id"]), question=d["question"], shape=d.get("shape", ""),
                                gold=list(d.get("gold") or []),
                                answer_contains=list(d.get("answer_contains") or []),
                                history=list(d.get("history") or []), notes=d.get("notes", "")))
        except (KeyError, TypeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}:{n}: not a question ({exc})") from None
    return out


def normalise_answer(text: str) -> str:
    """Text as answer strings are matched: lower case, every white-space run one space (a line
    break inside "day and a half" still matches)."""
    return " ".join(text.lower().split())


def is_hit(path: str, text: str, q: Question) -> bool:
    """The hit rule: from a gold path and holding at least one answer string (any case,
    white space collapsed)."""
    if path not in q.gold_paths:
        return False
    low = normalise_answer(text)
    return any(normalise_answer(a) in low for a in q.answer_contains)


def first_hit_rank(results: Sequence[tuple[str, str]], q: Question) -> int | None:
    """1-based rank of the first hit among ``results`` [(path, text)], or None."""
    for rank, (path, text) in enumerate(results, start=1):
        if is_hit(path, text, q):
            return rank
    return None


def context_hit(results: Sequence[tuple[str, str]], q: Question,
                budget: int = CONTEXT_CHARS) -> bool:
    """Whether the top results, concatenated best first and cut at ``budget`` characters, hold
    every answer string (case-insensitive, white space collapsed). False for a question without
    answer strings."""
    if not q.answer_contains:
        return False
    parts, used = [], 0
    for _path, text in results:
        if used >= budget:
            break
        piece = text[: budget - used]
        parts.append(piece)
        used += len(piece) + 1
    return context_holds("\n".join(parts), q)


def context_holds(context: str, q: Question) -> bool:
    """Whether a prompt's context holds every answer string (case-insensitive, white space
    collapsed). False for a question without answer strings."""
    if not q.answer_contains:
        return False
    text = normalise_answer(context)
    return all(normalise_answer(a) in text for a in q.answer_contains)


@dataclass
class Outcome:
    """One question under one setup."""

    id: str
    shape: str
    answerable: bool
    rank: int | None
    context_hit: bool
    answered: bool | None  # None: the setup has no "not covered" rule
    query: str = ""
    prompt_hit: bool | None = None  # None: the setup hands no prompt context
    # What the "not covered" rule saw (``coverage_signals``); None for setups without one.
    signals: dict[str, Any] | None = None


def summarise(outcomes: Sequence[Outcome]) -> dict[str, dict[str, Any]]:
    """Metrics per shape and ``overall`` (answerable questions), plus ``unanswerable``.

    Returns:
        {group: {"n", "recall@1", "recall@5", "recall@10", "mrr", "context_hit", "prompt_hit",
        "answered", "refused"}} and {"unanswerable": {"n", "not_covered"}} when there are such questions.
        Values are floats in [0, 1] (``answered``/``refused``/``not_covered`` None when the
        setup has no rule); ``refused`` = answerable questions wrongly judged "not covered".
    """
    groups: dict[str, list[Outcome]] = {}
    for o in outcomes:
        if o.answerable:
            groups.setdefault(o.shape, []).append(o)
            groups.setdefault("overall", []).append(o)
    out: dict[str, dict[str, Any]] = {name: _group_metrics(items) for name, items in groups.items()}
    unans = [o for o in outcomes if not o.answerable]
    if unans:
        judged = [o.answered for o in unans if o.answered is not None]
        out["unanswerable"] = {"n": len(unans),
                               "not_covered": (sum(1 for a in judged if not a) / len(judged))
                               if judged else None}
    return out


def _group_metrics(items: Sequence[Outcome]) -> dict[str, Any]:
    n = len(items)
    row: dict[str, Any] = {"n": n}
    for k in KS:
        row[f"recall@{k}"] = sum(1 for o in items if o.rank is not None and o.rank <= k) / n
    row["mrr"] = sum(1.0 / o.rank for o in items if o.rank is not None) / n
    row["context_hit"] = sum(1 for o in items if o.context_hit) / n
    prompts = [o.prompt_hit for o in items if o.prompt_hit is not None]
    row["prompt_hit"] = sum(prompts) / len(prompts) if prompts else None
    judged = [o.answered for o in items if o.answered is not None]
    row["answered"] = (sum(judged) / len(judged)) if judged else None
    row["refused"] = (1.0 - row["answered"]) if judged else None
    return row


MACRO_METRICS = ("recall@1", "recall@5", "recall@10", "mrr", "context_hit", "prompt_hit",
                 "refused")


def macro_average(reports: Sequence[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """The unweighted mean over corpora of one setup's ``overall`` metrics (``summarise``
    outputs, one per corpus), each corpus counting once whatever its size.

    Returns {"overall": {"n": corpora, metric: mean or None}, "unanswerable": {"n": total,
    "not_covered": mean over corpora that have unanswerable questions}}; a metric some corpus
    lacks (None) is averaged over the corpora that have it.
    """
    overall: dict[str, Any] = {"n": len(reports)}
    for m in MACRO_METRICS:
        vals = [r["overall"][m] for r in reports if r.get("overall", {}).get(m) is not None]
        overall[m] = sum(vals) / len(vals) if vals else None
    out: dict[str, Any] = {"overall": overall}
    unans = [r["unanswerable"] for r in reports if "unanswerable" in r]
    if unans:
        vals = [u["not_covered"] for u in unans if u["not_covered"] is not None]
        out["unanswerable"] = {"n": sum(u["n"] for u in unans),
                               "not_covered": sum(vals) / len(vals) if vals else None}
    return out


# ---------------------------------------------------------------------------------------------
# Setups
# ---------------------------------------------------------------------------------------------

SearchFn = Callable[[str, int], tuple]


@dataclass
class Setup:
    """A named retrieval setup: ``search(query, k) -> ([(path, text)], answered or None)``,
    or ``(..., answered, prompt context text)`` for a setup that packs a prompt's context,
    then optionally the "not covered" rule's signals (a dict, ``coverage_signals``)."""

    name: str
    search: SearchFn


def retriever_setup(name: str, retriever) -> Setup:
    """A setup over a ``varaverk.retrieval.search.Retriever``; "not covered" via ``confident``
    unless the retriever is lexical-only (BM25 has no calibrated scale). Its third value is the context
    a prompt would be handed from the hits (``expand`` then ``format_context``), its fourth
    the rule's signals (``coverage_signals``; None when lexical-only)."""

    def search(query: str, k: int):
        hits = retriever.search(query, k)
        results = [(h.chunk.path, h.chunk.text) for h in hits]
        answered = None if retriever.options.mode == "lexical" else retriever.confident(hits)
        prompt, _ = format_context(retriever.expand(hits, CONTEXT_CHARS), CONTEXT_CHARS)
        signals = None if retriever.options.mode == "lexical" else coverage_signals(hits)
        return results, answered, prompt, signals
    return Setup(name, search)


def coverage_signals(hits) -> dict[str, Any] | None:
    """What ``Retriever.confident`` judged, for calibrating it: {"best": best cosine,
    "margin": best over the pool edge, "effective": margin less the missed-words cost (cosine
    units; None without a pool edge), "absent": words the index never holds, "missed": words
    the leading hits do not hold (absent ones included), "missed_share": their IDF-weighted
    share in [0, 1], "words": content words looked up, "unknown": names no chunk contains,
    "exact", "alias": a hit titled with a name of the question, or named by a note alias
    (either decides before the constants)}; None without hits."""
    if not hits:
        return None
    h = hits[0]
    cov = h.coverage

    def rounded(x):
        return None if x is None else round(float(x), 4)
    return {"best": rounded(h.best_dense), "margin": rounded(cov.margin if cov else None),
            "effective": rounded(cov.effective_margin() if cov else None),
            "absent": list(cov.absent) if cov else [], "missed": list(cov.missed) if cov else [],
            "missed_share": rounded(cov.missed_share) if cov else None,
            "words": cov.words if cov else 0,
            "unknown": list(h.unknown), "exact": any(x.exact for x in hits),
            "alias": any(x.alias for x in hits)}


def windows(text: str, size: int = WINDOW, overlap: int = OVERLAP) -> list[str]:
    """Fixed character windows of ``size`` overlapping by ``overlap`` (the naive baseline)."""
    step = max(1, size - overlap)
    out = []
    for start in range(0, max(1, len(text)), step):
        piece = text[start:start + size]
        if piece.strip():
            out.append(piece)
        if start + size >= len(text):
            break
    return out


def baseline_setup(repo_root: Path, embedder, cache_dir: Path | None = None,
                   extra_sources: Iterable[Any] = ()) -> Setup:
    """The naive baseline: 1,000/100-character windows over every tracked text file, dense.

    Every ``git ls-files`` path that decodes as UTF-8 (binary files skipped) is windowed; the
    windows are embedded with ``embedder`` (cached in ``cache_dir`` by content hash, so a second
    run costs nothing) and scored by cosine similarity. ``extra_sources``: the
    ``named_sources.SourceSpec`` of AI_SOURCES, windowed too under their stored paths
    (``vault:notes/x.md``), so the baseline sees what the index sees.
    """
    items: list[tuple[str, str]] = _windows_of(Path(repo_root), lambda rel: rel)
    for spec in extra_sources:
        items.extend(_windows_of(spec.root, spec.stored_path))
    digest = hashlib.sha256()
    digest.update(f"{embedder.backend}/{embedder.model}".encode())
    for rel, piece in items:
        digest.update(rel.encode() + b"\0" + piece.encode() + b"\0")
    matrix = None
    cache = Path(cache_dir) / f"baseline-{digest.hexdigest()[:16]}.npy" if cache_dir else None
    if cache is not None and cache.is_file():
        matrix = np.load(cache)
    if matrix is None or matrix.shape[0] != len(items):
        result = embedder.embed([piece for _, piece in items])
        dim = embedder.dimension
        matrix = np.zeros((len(items), dim), dtype=np.float32)
        for i, vec in enumerate(result.vectors):
            if vec is not None:
                matrix[i] = vec
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            np.save(cache, matrix)
    matrix = np.ascontiguousarray(matrix, dtype=np.float32)
    valid = usable_rows(matrix)

    def search(query: str, k: int):
        q = embedder.embed_query(query)
        rows = top_k(dense_scores(matrix, q), k, valid)
        return [items[r] for r in rows], None
    return Setup("baseline", search)


def _windows_of(root: Path, stored_path) -> list[tuple[str, str]]:
    """``(stored path, window)`` for every tracked UTF-8 text file of one work tree."""
    items: list[tuple[str, str]] = []
    for rel in _tracked_paths(list_tracked(root)):
        try:
            raw = (Path(root) / rel).read_bytes()
        except OSError:
            continue
        if b"\0" in raw[:8192]:
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        items.extend((stored_path(rel), piece) for piece in windows(text))
    return items


def _tracked_paths(listing) -> list[str]:
    """Regular tracked files of a ``varaverk.documents.tracked_files.Listing`` (no gitlinks, no symlinks)."""
    return [e.path for e in listing.entries if str(e.mode) in ("100644", "100755")]


# ---------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------

def run_setup(setup: Setup, questions: Sequence[Question], queries: dict[str, str],
              k: int = max(KS)) -> list[Outcome]:
    """Run every question through one setup with its prepared query.

    Args:
        setup: the retrieval setup.
        questions: the questions, in the order the outcomes come back.
        queries: the search query per question id (``prepare_queries``); a missing id searches
            the question itself.
        k: results retrieved per question (default 10, the largest of ``KS``).

    Returns one Outcome per question: the 1-based rank of the first hit (None when there is
    none or the question is unanswerable), the context hit, the setup's "answered" verdict and
    the prompt hit (None for a setup that packs no prompt context).
    """
    out = []
    for q in questions:
        query = queries.get(q.id, q.question)
        results, answered, *extra = setup.search(query, k)
        prompt = extra[0] if extra else None
        out.append(Outcome(q.id, q.shape, q.answerable,
                           first_hit_rank(results, q) if q.answerable else None,
                           context_hit(results, q) if q.answerable else False,
                           answered, query,
                           context_holds(prompt, q) if prompt is not None and q.answerable
                           else None,
                           extra[1] if len(extra) > 1 else None))
    return out


def prepare_queries(questions: Iterable[Question], rewrite: str = "fallback",
                    chat_client=None) -> dict[str, str]:
    """The search query per question: the question itself, or for questions with history the
    standalone rewrite ("none": unchanged; "fallback": model-free; "model": with the model,
    falling back on any error)."""
    out = {}
    for q in questions:
        if not q.history or rewrite == "none":
            out[q.id] = q.question
        elif rewrite == "model":
            out[q.id] = model_rewrite(q.question, q.history, chat_client)
        else:
            out[q.id] = carry_subject(q.question, q.history)
    return out


def format_table(reports: dict[str, dict[str, dict[str, Any]]], title: str = "",
                 shapes: bool = True) -> str:
    """A markdown table: one row per setup × group (``overall`` only when ``shapes`` is
    False), metrics as columns; ``refused`` is answerable questions judged "not covered",
    ``not covered`` the share of unanswerable ones caught."""
    cols = ["recall@1", "recall@5", "recall@10", "mrr", "context_hit", "prompt_hit", "refused"]
    lines = [f"### {title}", ""] if title else []
    lines.append("| setup | group | n | " + " | ".join(cols) + " | not covered |")
    lines.append("|---" * (len(cols) + 4) + "|")
    for setup, report in reports.items():
        groups = ["overall"]
        if shapes:
            groups += sorted(g for g in report if g not in ("overall", "unanswerable"))
        for g in groups:
            if g in report:
                lines.append(_table_row(setup, g, report))
    return "\n".join(lines)


def _fmt(v) -> str:
    return "–" if v is None else f"{v:.3f}"


def _table_row(setup: str, group: str, report: dict[str, dict[str, Any]]) -> str:
    row = report[group]
    cols = ["recall@1", "recall@5", "recall@10", "mrr", "context_hit", "prompt_hit", "refused"]
    nc_s = ""
    if group == "overall" and "unanswerable" in report:
        un = report["unanswerable"]
        nc_s = f"{_fmt(un.get('not_covered'))} of {un['n']}"
    return (f"| {setup} | {group} | {row['n']} | " + " | ".join(_fmt(row.get(c)) for c in cols)
            + f" | {nc_s} |")
