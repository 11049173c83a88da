"""Leave-one-corpus-out calibration of the "not covered" rule, from ``ai-eval --json`` output.

    python -m tests.benchmarks.loco_coverage EVAL.json [--no-score] [--no-margin] [--closest N]

The rule's constants (``AI_MIN_SCORE``, the coverage margin ``AI_MIN_MARGIN`` and the cost of
missed words) are fitted on every corpus but one and tested on the one left out, each corpus in
turn. A fold's fit is the strictest setting that wrongly refuses at most one answerable
question in 50 on *each* training corpus (so none on a corpus of fewer than 50): refusing an
answerable question costs a user an answer the documentation holds, while an unanswerable
question the rule lets through still meets a prompt that answers only from the context. Ties
go to the lower missed-words cost. Prints per fold the fitted constants and the held-out
corpus's refused answerable and caught unanswerable questions, then the pooled held-out totals
and the fit on all corpora (the constants to ship). Each fold also says how near the held-out
corpus's answerable questions sit to the fitted threshold (``headroom``: the smallest value
minus the threshold, and how many lie within ``NEAR`` of it): a fit that refuses none but
has answerable questions just above it would not carry to a corpus worded a little otherwise.
``--closest N`` prints the unanswerable questions the fit on all lets through beside the N
answerable questions nearest to its threshold, with what the rule saw of each.

What the rule saw per question comes from the JSON's ``signals`` (``evaluation.
coverage_signals``): a question with an unknown name, or decided by a title match or an alias
(``exact``, ``alias``), is decided before any constant and counts as it was answered.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

DEFAULT_COSTS = tuple(round(0.05 * i, 2) for i in range(7))
NEAR = (0.02, 0.05)     # cosine units: the headroom bands counted per fold


@dataclass(frozen=True)
class Row:
    """One question of one corpus as the rule saw it (cosine units; ``fixed`` the verdict of a
    rule without constants, None when the constants decide)."""

    corpus: str
    answerable: bool
    best: float | None
    margin: float | None
    missed_share: float
    fixed: bool | None
    qid: str = ""
    query: str = ""


@dataclass(frozen=True)
class Fit:
    """Fitted constants: refuse when ``best < min_score`` or
    ``margin − cost × missed_share < min_margin`` (each None: that test is off)."""

    min_score: float | None
    min_margin: float | None
    cost: float

    def answered(self, row: Row) -> bool:
        if row.fixed is not None:
            return row.fixed
        if self.min_score is not None and row.best is not None and row.best < self.min_score:
            return False
        if self.min_margin is not None and row.margin is not None:
            return row.margin - self.cost * row.missed_share >= self.min_margin
        return True


def rows_of(result: dict) -> list[Row]:
    """The "ours" questions of an ``ai-eval --json`` result with signals (others skipped)."""
    out = []
    for report in result["corpora"]:
        corpus = Path(report["repo"]).name
        if corpus == "empty":  # a notes-only corpus: name it after its first source
            corpus = Path(report["questions"]).stem.split("-")[0]
        for q in report["per_question"].get("ours", []):
            s = q.get("signals")
            if not s:
                continue
            fixed = None
            if s.get("exact") or s.get("alias"):
                fixed = True
            elif s.get("unknown"):
                fixed = False
            out.append(Row(corpus, q["answerable"], s.get("best"), s.get("margin"),
                           s.get("missed_share") or 0.0, fixed, q.get("id", ""),
                           q.get("query", "")))
    return out


def allowed(n: int) -> int:
    """Wrongly refused answerable questions a corpus of ``n`` may have: one in 50."""
    return n // 50


def _strictest(values_by_corpus: dict[str, tuple[list[float], int]]) -> float | None:
    """The largest threshold t (refuse below t) that refuses at most its budget of each
    corpus's values (``{corpus: (values, budget)}``); None when there are no values."""
    limits = []
    for vals, budget in values_by_corpus.values():
        if not vals:
            continue
        ordered = sorted(vals)
        limits.append(ordered[min(max(budget, 0), len(ordered) - 1)])
    return min(limits) if limits else None


def fit(rows: list[Row], costs=DEFAULT_COSTS, use_score: bool = True,
        use_margin: bool = True) -> Fit:
    """The strictest constants on ``rows`` (module docstring), the cost that catches most."""
    free = [r for r in rows if r.fixed is None]
    corpora = sorted({r.corpus for r in rows})
    ans_n = {c: sum(1 for r in rows if r.corpus == c and r.answerable) for c in corpora}

    def by_corpus(value) -> dict[str, tuple[list[float], int]]:
        out: dict[str, tuple[list[float], int]] = {}
        for c in corpora:
            vals = [value(r) for r in free if r.corpus == c and r.answerable]
            # the rules without constants use up a corpus's allowance first
            spent = sum(1 for r in rows if r.corpus == c and r.answerable and r.fixed is False)
            out[c] = ([v for v in vals if v is not None], allowed(ans_n[c]) - spent)
        return out

    min_score = _strictest(by_corpus(lambda r: r.best)) if use_score else None
    best = Fit(min_score, None, 0.0)
    if not use_margin:
        return best
    best_caught = caught(rows, best)
    for cost in costs:
        m = _strictest(by_corpus(lambda r, c=cost: None if r.margin is None
                                 else r.margin - c * r.missed_share))
        trial = Fit(min_score, m, cost)
        if caught(rows, trial) > best_caught:
            best, best_caught = trial, caught(rows, trial)
    return best


def caught(rows: list[Row], f: Fit) -> int:
    return sum(1 for r in rows if not r.answerable and not f.answered(r))


def refused(rows: list[Row], f: Fit) -> int:
    return sum(1 for r in rows if r.answerable and not f.answered(r))


def headroom(row: Row, f: Fit) -> float | None:
    """How far ``row`` sits above the refusal of ``f`` (cosine units; negative: refused): the
    smallest of ``best − min_score`` and ``margin − cost × missed_share − min_margin`` over
    the tests ``f`` has on; None when a rule without constants decides or no test applies."""
    if row.fixed is not None:
        return None
    room = []
    if f.min_score is not None and row.best is not None:
        room.append(row.best - f.min_score)
    if f.min_margin is not None and row.margin is not None:
        room.append(row.margin - f.cost * row.missed_share - f.min_margin)
    return min(room) if room else None


def near(rows: list[Row], f: Fit) -> str:
    """The answerable ``rows``' headroom under ``f``: the smallest, and how many lie within
    each ``NEAR`` band of the threshold (refused ones included)."""
    rooms = [h for r in rows if r.answerable for h in [headroom(r, f)] if h is not None]
    if not rooms:
        return "headroom -"
    bands = " ".join(f"<{b:g}: {sum(1 for h in rooms if h < b)}" for b in NEAR)
    return f"headroom min {min(rooms):+.4f} {bands}"


def closest(rows: list[Row], f: Fit, n: int) -> list[str]:
    """The unanswerable ``rows`` ``f`` lets through and then the ``n`` answerable ones nearest
    its threshold, lowest headroom first, one line each with what the rule saw."""
    def line(r: Row, h: float) -> str:
        margin = "-" if r.margin is None else f"{r.margin:.4f}"
        return (f"  {r.corpus:10s} {r.qid:6s} headroom {h:+.4f} best {r.best} margin "
                f"{margin} missed {r.missed_share:.3f} | {r.query[:70]}")
    ranked = [(h, r) for r in rows for h in [headroom(r, f)] if h is not None]
    ranked.sort(key=lambda hr: hr[0])
    let = [line(r, h) for h, r in ranked if not r.answerable and f.answered(r)]
    near_ans = [line(r, h) for h, r in ranked if r.answerable][:n]
    return (["unanswerable let through:"] + let
            + [f"answerable nearest the threshold ({len(near_ans)}):"] + near_ans)


def _fmt(x: float | None) -> str:
    return "off" if x is None else f"{x:.4f}"


def loco(rows: list[Row], **kw) -> list[str]:
    """One line per held-out corpus, then the pooled held-out totals and the fit on all."""
    lines = []
    corpora = sorted({r.corpus for r in rows})
    tot = [0, 0, 0, 0]
    for held in corpora:
        f = fit([r for r in rows if r.corpus != held], **kw)
        test = [r for r in rows if r.corpus == held]
        na = sum(r.answerable for r in test)
        nu = len(test) - na
        rf, ct = refused(test, f), caught(test, f)
        tot = [tot[0] + rf, tot[1] + na, tot[2] + ct, tot[3] + nu]
        ok = "ok" if rf <= allowed(na) else "OVER"
        lines.append(f"held out {held:10s} min_score {_fmt(f.min_score)} min_margin "
                     f"{_fmt(f.min_margin)} cost {f.cost:.2f} | refused {rf}/{na} {ok} "
                     f"caught {ct}/{nu} | {near(test, f)}")
    lines.append(f"held-out pooled: refused {tot[0]}/{tot[1]} caught {tot[2]}/{tot[3]}")
    f = fit(rows, **kw)
    lines.append(f"fit on all: min_score {_fmt(f.min_score)} min_margin {_fmt(f.min_margin)} "
                 f"cost {f.cost:.2f} | refused {refused(rows, f)} caught {caught(rows, f)} | "
                 f"{near(rows, f)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("json", help="ai-eval --json output")
    p.add_argument("--no-score", action="store_true", help="leave the min_score test off")
    p.add_argument("--no-margin", action="store_true", help="leave the margin test off")
    p.add_argument("--closest", type=int, default=0, metavar="N",
                   help="list what the fit on all lets through beside the N answerable "
                        "questions nearest its threshold")
    args = p.parse_args(argv)
    rows = rows_of(json.loads(Path(args.json).read_text()))
    kw = {"use_score": not args.no_score, "use_margin": not args.no_margin}
    for line in loco(rows, **kw):
        print(line)
    if args.closest > 0:
        for line in closest(rows, fit(rows, **kw), args.closest):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
