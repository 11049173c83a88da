#!/usr/bin/env python3
# varaverk :: Tools/ai_eval.py
# Measure retrieval on a question file: recall@k, MRR, context hit, "not covered", per shape.
#
# PURPOSE
#   Answers are only as good as what retrieval hands the model, so retrieval is measured, not
#   guessed. This tool runs a question file in the shared eval format against a repository and
#   prints, per question shape and overall, recall@1/@5/@10, MRR over the first hit, the
#   context hit (every answer string inside the top 4,000 characters) and, for unanswerable
#   questions, whether "not covered" was said. It compares setups side by side in one run:
#   the naive fixed-window baseline, dense only, lexical only and ours. Its figures are the
#   ones quoted in release notes.
#
# OPERATIONAL MODEL
#   Index Per Repository
#     The repository is indexed with the configured embedder into a data folder of its own
#     (--data-dir, default a folder under AI_DATA_DIR/eval named after the repository), with
#     the same ai-index code path users run; an unchanged repository is not re-embedded.
#   Baseline Windows
#     The baseline cuts every tracked text file into 1,000-character windows overlapping by
#     100 characters and ranks them by cosine similarity; its vectors are cached beside the
#     index by content hash.
#   One Query Per Question
#     Every setup gets the same search query: the question itself, or for a follow-up the
#     standalone rewrite chosen with --rewrite, so the setups differ by retrieval alone. The
#     rewrite modes are compared on the follow-up questions in a separate table.
#
# DESIGN PRINCIPLES
#   The Hit Rule Is Fixed
#     A chunk hits when it comes from a gold path and contains one of the answer strings,
#     case-insensitively; nothing else counts, so figures stay comparable across chunkers.
#   Compare In One Run
#     Setups are measured on the same index, the same questions and the same queries in one
#     run, so a table never mixes figures from different days or data.
#   Improve By Kind Of Document
#     The per-shape rows exist to show which kind of question or document is weak; tuning to
#     single questions would only overfit the dev set.
#
# OPERATIONAL SAFEGUARDS
#   Read-Only On The Repository
#     The repository is only listed and read; the index and caches go to the data folder.
#   Model Rewrite Falls Back
#     With --rewrite model, any model error falls back to the model-free rewrite for that
#     question instead of aborting the run, and the table says which mode ran.
#
# CONFIGURATION
#   AI_EMBED_BACKEND, AI_EMBED_MODEL
#     The embedder used for the index and the baseline (default: the offline local model).
#   AI_GEN_BACKEND, AI_GEN_MODEL
#     The model used by --rewrite model.
#   AI_DATA_DIR
#     Parent of the default evaluation data folders.
#   AI_MIN_SCORE
#     The relevance threshold under test (0: the calibrated default).
#
# RUNTIME MODES
#   ai-eval --repo PATH QUESTIONS.jsonl
#     Index the repository (if needed) and print the markdown tables.
#   --setups baseline,dense,lexical,ours
#     Which setups to compare (default all four).
#   --rewrite none|fallback|model
#     How follow-ups become standalone queries for all setups (default fallback).
#   --json
#     Print one JSON object: {"questions", "repo", "rewrite", "setups": {name: {group:
#     metrics}}, "rewrites": {...}, "per_question": {name: [...]}} instead of tables.
#   --data-dir PATH, --config PATH, -v
#     Where the index goes; another conf file; per-question lines on stderr.
"""Measure retrieval on a question file (see the header above)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import asdict
from pathlib import Path

from varaverk import exitcodes

log = logging.getLogger("varaverk.eval")
SETUPS = ("baseline", "dense", "lexical", "ours")


def build_parser() -> argparse.ArgumentParser:
    """The ``ai-eval`` command line (question file, repository, setups, output)."""
    p = argparse.ArgumentParser(prog="ai-eval", description=(
        "Measure retrieval on a question file (shared eval format): recall@1/@5/@10, MRR, "
        "context hit and 'not covered', per shape, for several setups side by side."))
    p.add_argument("questions", help="question file (JSON lines)")
    p.add_argument("--repo", help="repository to index (default AI_REPO_ROOT)")
    p.add_argument("--data-dir", help="where the evaluation index goes")
    p.add_argument("--setups", default=",".join(SETUPS),
                   help="comma-separated subset of " + ",".join(SETUPS))
    p.add_argument("--rewrite", choices=("none", "fallback", "model"), default="fallback",
                   help="follow-up rewrite used for every setup (default fallback)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--config", help="conf file (default: Configurations/master.conf)")
    p.add_argument("-v", "--verbose", action="store_true", help="per-question lines on stderr")
    return p


def evaluate(settings, questions_path: str, setups: list[str], rewrite: str = "fallback",
             verbose: bool = False) -> dict:
    """Index ``settings.ai_repo_root`` and run the setups; returns the JSON report."""
    from varaverk.embedding import make_embedder
    from varaverk.evaluation import (baseline_setup, load_questions, prepare_queries,
                                     retriever_setup, run_setup, summarise)
    from varaverk.indexer import refresh
    from varaverk.search import Retriever
    from varaverk.store import Index

    questions = load_questions(questions_path)
    embedder = make_embedder(settings)
    refresh(settings, embedder, progress=False)
    index = Index.open(settings.index_path, readonly=True)
    chat_client = None
    if rewrite == "model":
        from varaverk.generation import make_chat_client
        chat_client = make_chat_client(settings)
    queries = prepare_queries(questions, rewrite, chat_client)

    built = {}
    for name in setups:
        if name == "baseline":
            built[name] = baseline_setup(settings.ai_repo_root, embedder,
                                         settings.ai_data_dir / "cache")
        elif name in ("dense", "lexical"):
            built[name] = retriever_setup(name, Retriever(settings, index, embedder, mode=name))
        elif name == "ours":
            built[name] = retriever_setup(name, Retriever(settings, index, embedder))
        else:
            raise ValueError(f"unknown setup {name!r}; choose from {', '.join(SETUPS)}")

    report = {"questions": str(questions_path), "repo": str(settings.ai_repo_root),
              "rewrite": rewrite, "setups": {}, "per_question": {}, "rewrites": {}}
    for name, setup in built.items():
        outcomes = run_setup(setup, questions, queries)
        report["setups"][name] = summarise(outcomes)
        report["per_question"][name] = [asdict(o) for o in outcomes]
        if verbose:
            for o in outcomes:
                print(f"{name:8} {o.id:6} {o.shape:18} rank={o.rank} ctx={o.context_hit} "
                      f"answered={o.answered} | {o.query}", file=sys.stderr)

    followups = [q for q in questions if q.history]
    if followups and "ours" in built:
        modes = ["none", "fallback"] + (["model"] if chat_client is not None else [])
        for mode in modes:
            qs = prepare_queries(followups, mode, chat_client)
            report["rewrites"][mode] = summarise(run_setup(built["ours"], followups, qs))
    return report


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns an exit code (0 ok, 66 no repository, 78 config, 1 failure)."""
    from varaverk.config import load_settings_or_report
    from varaverk.evaluation import format_table

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    settings = load_settings_or_report("ai-eval", args.config)
    if settings is None:
        return exitcodes.CONFIG
    repo = Path(args.repo).resolve() if args.repo else settings.ai_repo_root
    if not (repo / ".git").exists():
        print(f"ai-eval: {repo} is not a git repository (make one from a folder with "
              f"git init && git add -A && git commit)", file=sys.stderr)
        return exitcodes.CONFIG
    data = Path(args.data_dir) if args.data_dir else settings.ai_data_dir / "eval" / repo.name
    settings = settings.replace(ai_repo_root=repo, ai_data_dir=data.resolve(), ai_enabled=True)
    setups = [s.strip() for s in args.setups.split(",") if s.strip()]
    try:
        report = evaluate(settings, args.questions, setups, args.rewrite, args.verbose)
    except (ValueError, OSError) as exc:
        print(f"ai-eval: {exc}", file=sys.stderr)
        return exitcodes.FAILURE
    if args.json:
        print(json.dumps(report, indent=2))
        return exitcodes.OK
    print(format_table(report["setups"], f"{Path(args.questions).name} on {repo.name} "
                                         f"(follow-up rewrite: {args.rewrite})"))
    if report["rewrites"]:
        print()
        print(format_table(report["rewrites"], "follow-ups only, ours, by rewrite mode"))
    return exitcodes.OK


if __name__ == "__main__":
    sys.exit(main())
