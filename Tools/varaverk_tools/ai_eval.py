#!/usr/bin/env python3
# varaverk :: Tools/varaverk_tools/ai_eval.py
# Measure retrieval on question files: recall@k, MRR, context hit, "not covered", per corpus.
#
# PURPOSE
#   Answers are only as good as what retrieval hands the model, so retrieval is measured, not
#   guessed. This tool runs question files in the shared eval format against their
#   repositories (several corpora in one run) and prints, per corpus and then as the macro
#   average over corpora, recall@1/@5/@10, MRR over the first hit, the context hit (every
#   answer string inside the top 4,000 characters, the headline figure), the prompt hit (the
#   same inside the 4,000-character context a prompt would be packed with), the share of
#   answerable questions wrongly judged "not covered" and the share of unanswerable ones
#   caught. It compares setups side by side in one run: the naive fixed-window baseline,
#   dense only, lexical only and ours. Its figures are the ones quoted in release notes.
#
# OPERATIONAL MODEL
#   Index Per Repository
#     Each repository is indexed with the configured embedder into a folder of its own under
#     the evaluation folder (--data-dir, default AI_DATA_DIR/eval; the folder is named after
#     the repository), with the same ai-index code path users run; an unchanged repository is
#     not re-embedded.
#   Vectors Cached By Content
#     Every vector (index chunks, baseline windows, queries) is kept in vectors.sqlite in the
#     evaluation folder, keyed by a hash of model and text: after a chunker change only the
#     chunks whose text changed are embedded again, so iterating costs seconds, not minutes.
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
#   Every Corpus Counts Once
#     The macro average weighs corpora equally, so a gain on one corpus that costs another
#     shows as what it is; the answer strings match with white space collapsed.
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
#   AI_MIN_MARGIN
#     The coverage rule's margin under test (0: the calibrated default).
#
# RUNTIME MODES
#   ai-eval QA.jsonl=REPO [QA.jsonl=REPO ...]
#     Index each repository (if needed) and print a table per corpus, then the macro average.
#   ai-eval QA.jsonl=REPO,NAME=TYPE:PATH,...
#     A corpus with sources beside its repository (AI_SOURCES for that corpus only), e.g. the
#     tests' notes corpus made by python -m tests.notes.corpus DEST.
#   ai-eval --repo PATH QUESTIONS.jsonl
#     One corpus (a question file without =REPO uses --repo, else AI_REPO_ROOT).
#   --shapes
#     Per-shape rows in every corpus table (default: overall rows only).
#   --setups baseline,dense,lexical,ours
#     Which setups to compare (default all four).
#   --rewrite none|fallback|model
#     How follow-ups become standalone queries for all setups (default fallback).
#   --json
#     Print one JSON object: {"corpora": [{"questions", "repo", "rewrite", "setups": {name:
#     {group: metrics}}, "rewrites": {...}, "per_question": {name: [...]}}, ...], "macro":
#     {name: {"overall", "unanswerable"}}} instead of tables.
#   --data-dir PATH, --config PATH, -v
#     The evaluation folder; another conf file; per-question lines on stderr (with what
#     the "not covered" rule saw: best cosine, margin over the pool edge, absent words, and
#     the IDF-weighted share of question words the leading results miss, with those words).
"""Measure retrieval on question files over their repositories (see the header above)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import asdict
from pathlib import Path

from varaverk import cli
from varaverk import exitcodes
from varaverk.cli import HelpFormatter
from varaverk.config import ConfigError, add_config_option, load_settings
from varaverk.named_sources import all_sources, parse_sources

# The engine (evaluation and search with numpy, embedding and vector_cache with httpx, the
# indexer with sqlite3 and subprocess) is imported by the step that runs it, so that --help
# loads none of it (README, "Start-up path").

log = logging.getLogger("varaverk.eval")
SETUPS = ("baseline", "dense", "lexical", "ours")


def build_parser() -> argparse.ArgumentParser:
    """The ``ai-eval`` command line (question files and repositories, setups, output)."""
    p = argparse.ArgumentParser(prog="ai-eval", description=(
        "Measure retrieval on question files (shared eval format): recall@1/@5/@10, MRR, "
        "context hit, answerable questions refused and unanswerable ones caught, per corpus "
        "and as the macro average, for several setups side by side."),
        formatter_class=HelpFormatter,
        epilog=exitcodes.epilog(exitcodes.OK, exitcodes.FAILURE, exitcodes.USAGE,
                                exitcodes.CONFIG, exitcodes.INTERRUPTED))
    p.add_argument("corpora", nargs="+", metavar="QA.jsonl[=REPO]",
                   help="question file and its repository; without =REPO, --repo")
    p.add_argument("--repo", help="repository for question files given without =REPO "
                                  "(default AI_REPO_ROOT)")
    p.add_argument("--data-dir", help="evaluation folder: one index per repository and the "
                                      "vector cache (default AI_DATA_DIR/eval)")
    p.add_argument("--setups", default=",".join(SETUPS),
                   help="comma-separated subset of " + ",".join(SETUPS))
    p.add_argument("--rewrite", choices=("none", "fallback", "model"), default="fallback",
                   help="follow-up rewrite used for every setup (default fallback)")
    p.add_argument("--shapes", action="store_true", help="per-shape rows in corpus tables")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_config_option(p)
    p.add_argument("-v", "--verbose", action="store_true", help="per-question lines on stderr, with the 'not covered' rule's signals")
    return p


def build_setups(settings, index, embedder, setups: list[str]) -> dict:
    """The named setups over one corpus's index (raises ValueError for an unknown name)."""
    from varaverk.evaluation import baseline_setup, retriever_setup
    from varaverk.retrieval.options import RetrieverOptions
    from varaverk.retrieval.search import Retriever

    built = {}
    for name in setups:
        if name == "baseline":
            built[name] = baseline_setup(settings.ai_repo_root, embedder,
                                         settings.ai_data_dir / "cache",
                                         all_sources(settings)[1:])
        elif name in ("dense", "lexical"):
            options = RetrieverOptions.from_settings(settings, mode=name, preload=True)
            built[name] = retriever_setup(name, Retriever(settings, index, embedder,
                                                          options=options))
        elif name == "ours":
            options = RetrieverOptions.from_settings(settings, preload=True)
            built[name] = retriever_setup(name, Retriever(settings, index, embedder,
                                                          options=options))
        else:
            raise ValueError(f"unknown setup {name!r}; choose from {', '.join(SETUPS)}")
    return built


def evaluate(settings, questions_path: str, setups: list[str], rewrite: str = "fallback",
             verbose: bool = False, embedder=None) -> dict:
    """Index ``settings.ai_repo_root`` and run the setups; returns one corpus's JSON report.

    ``embedder``: the embedder to use (a ``varaverk.vector_cache.CachingEmbedder`` in
    ``main``); None makes one from settings.
    """
    from varaverk.embedding import make_embedder
    from varaverk.evaluation import load_questions, prepare_queries, run_setup, summarise
    from varaverk.index.refresh import refresh
    from varaverk.index.store.index import Index

    questions = load_questions(questions_path)
    embedder = embedder or make_embedder(settings)
    refresh(settings, embedder, progress=False)
    index = Index.open(settings.index_path, readonly=True)
    chat_client = None
    if rewrite == "model":
        from varaverk.answering.generation.chat_client import make_chat_client
        chat_client = make_chat_client(settings)
    queries = prepare_queries(questions, rewrite, chat_client)
    built = build_setups(settings, index, embedder, setups)

    report = {"questions": str(questions_path), "repo": str(settings.ai_repo_root),
              "rewrite": rewrite, "setups": {}, "per_question": {}, "rewrites": {}}
    for name, setup in built.items():
        outcomes = run_setup(setup, questions, queries)
        report["setups"][name] = summarise(outcomes)
        report["per_question"][name] = [asdict(o) for o in outcomes]
        if verbose:
            for o in outcomes:
                print(f"{name:8} {o.id:6} {o.shape:18} rank={o.rank} ctx={o.context_hit} "
                      f"prompt={o.prompt_hit} answered={o.answered}{_signals_text(o.signals)} | {o.query}",
                      file=sys.stderr)

    followups = [q for q in questions if q.history]
    if followups and "ours" in built:
        modes = ["none", "fallback"] + (["model"] if chat_client is not None else [])
        for mode in modes:
            qs = prepare_queries(followups, mode, chat_client)
            report["rewrites"][mode] = summarise(run_setup(built["ours"], followups, qs))
    return report


def _signals_text(signals: dict | None) -> str:
    """The "not covered" rule's signals on a -v line (empty without them)."""
    if not signals:
        return ""
    absent = ",".join(signals["absent"]) or "-"
    missed = ",".join(signals["missed"]) or "-"
    return (f" best={signals['best']} margin={signals['margin']} "
            f"effective={signals['effective']} absent={absent}/{signals['words']} "
            f"missed={signals['missed_share']}:{missed}")


def parse_corpora(specs: list[str], default_repo: Path) -> list[tuple[Path, Path, tuple]]:
    """``QA.jsonl=REPO`` (or ``QA.jsonl``, meaning ``default_repo``) as (questions, repo,
    sources) triples, repositories resolved; ``REPO,NAME=TYPE:PATH,...`` adds AI_SOURCES for
    that corpus only (a notes corpus: ``notes-qa.jsonl=REPO,vault=notes:/tmp/vault``).
    Raises ValueError naming a pair whose repository is not a git repository, whose
    question file is missing or whose sources are not NAME=TYPE:PATH."""
    out = []
    for spec in specs:
        qa, sep, rest = spec.partition("=")
        repo, *extra = rest.split(",")
        parse_sources(extra)
        repo_path = Path(repo).resolve() if sep else default_repo
        if not Path(qa).is_file():
            raise ValueError(f"{qa}: no such question file")
        if not (repo_path / ".git").exists():
            raise ValueError(f"{repo_path} is not a git repository (make one from a folder "
                             f"with git init && git add -A && git commit)")
        out.append((Path(qa), repo_path, tuple(extra)))
    return out


def _data_dirs(corpora: list[tuple[Path, Path, tuple]], root: Path) -> list[Path]:
    """One index folder per corpus under ``root``, named after its repository (and the
    question file when two corpora share a repository name)."""
    names = [repo.name for _, repo, _ in corpora]
    return [root / (name if names.count(name) == 1 else f"{name}-{qa.stem}")
            for name, (qa, _, _) in zip(names, corpora)]


def pooled_not_covered(reports: list[dict], setup: str) -> dict | None:
    """Counts over every corpus for one setup: answerable questions refused and unanswerable
    ones caught ({"refused", "answerable", "caught", "unanswerable"}); None without a rule."""
    rows = [o for r in reports for o in r["per_question"].get(setup, [])]
    if not rows or all(o["answered"] is None for o in rows):
        return None
    ans = [o for o in rows if o["answerable"]]
    una = [o for o in rows if not o["answerable"]]
    return {"refused": sum(1 for o in ans if o["answered"] is False), "answerable": len(ans),
            "caught": sum(1 for o in una if o["answered"] is False), "unanswerable": len(una)}


def run(settings, corpora: list[tuple[Path, Path, tuple]], root: Path, setups: list[str],
        rewrite: str, verbose: bool) -> dict:
    """Evaluate every corpus with one cached embedder; returns {"corpora", "macro"}."""
    from varaverk.embedding import make_embedder
    from varaverk.evaluation import macro_average
    from varaverk.vector_cache import CachingEmbedder

    reports = []
    with CachingEmbedder(make_embedder(settings), root / "vectors.sqlite") as embedder:
        for (qa, repo, extra), data in zip(corpora, _data_dirs(corpora, root)):
            corpus = settings.replace(ai_repo_root=repo, ai_data_dir=data.resolve(),
                                      ai_enabled=True, ai_sources=extra)
            reports.append(evaluate(corpus, str(qa), setups, rewrite, verbose, embedder))
        log.info("vector cache: %d hits, %d embedded", embedder.hits, embedder.misses)
    macro = {name: macro_average([r["setups"][name] for r in reports]) for name in setups}
    for name in setups:
        macro[name]["pooled"] = pooled_not_covered(reports, name)
    return {"corpora": reports, "macro": macro}


def print_tables(result: dict, shapes: bool, rewrite: str) -> None:
    """The markdown tables of ``run``: one per corpus, follow-ups, then the macro average."""
    from varaverk.evaluation import format_table

    for report in result["corpora"]:
        print(format_table(report["setups"], f"{Path(report['questions']).name} on "
                                             f"{Path(report['repo']).name} "
                                             f"(follow-up rewrite: {rewrite})", shapes))
        if report["rewrites"]:
            print()
            print(format_table(report["rewrites"], "follow-ups only, ours, by rewrite mode"))
        print()
    if len(result["corpora"]) > 1:
        print(format_table(result["macro"], f"macro average over {len(result['corpora'])} "
                                            f"corpora", shapes=False))
    for name, m in result["macro"].items():
        p = m.get("pooled")
        if p:
            print(f"{name}: 'not covered' caught {p['caught']}/{p['unanswerable']} unanswerable, "
                  f"refused {p['refused']}/{p['answerable']} answerable (all corpora)")


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns an exit code (0 ok, 78 config or no repository, 1 failure)."""
    return cli.run("ai-eval", _main, argv)


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    settings = load_settings(args.config)
    default_repo = Path(args.repo).resolve() if args.repo else settings.ai_repo_root
    try:
        corpora = parse_corpora(args.corpora, default_repo)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    root = (Path(args.data_dir) if args.data_dir else settings.ai_data_dir / "eval").resolve()
    setups = [s.strip() for s in args.setups.split(",") if s.strip()]
    try:
        result = run(settings, corpora, root, setups, args.rewrite, args.verbose)
    except (ValueError, OSError) as exc:
        if isinstance(exc, ConfigError):
            raise
        print(f"ai-eval: {exc}", file=sys.stderr)
        return exitcodes.FAILURE
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_tables(result, args.shapes, args.rewrite)
    return exitcodes.OK


if __name__ == "__main__":
    sys.exit(main())
