#!/usr/bin/env python3
# varaverk :: Tools/varaverk_tools/ai_query.py
# Ask the homelab's documentation a question from the command line.
#
# PURPOSE
#   ai-query answers a question from the repository's own documentation, with the place
#   each answer came from. With --search it prints the verbatim chunks that match and
#   generates nothing: the trustworthy mode, which needs no model server. Without it, a
#   local model writes an answer from those chunks, streamed as it is written, citing each
#   claim as path › SECTION › title.
#
# OPERATIONAL MODEL
#   Retrieval
#     The question (or, with --history, the last question rewritten to carry the
#     conversation's subject) is embedded and scored against every chunk of the index with
#     one matrix product, searched with SQLite FTS5 as well, and the two rankings are fused;
#     the question's shape boosts the header section that usually answers it, and a name
#     written in the question (MOVER_STOP_TIMEOUT, --force-delete) puts its own chunk first.
#   Answering
#     Generation goes through the chat worker (AI/varaverk/answering/answer.py) like the dock does:
#     the profile's system prompt, the history, the labelled excerpts and the question.
#     Tokens are printed as they arrive; reasoning is kept apart and shown only with
#     --show-reasoning; the sources are listed after the answer.
#   Not Covered
#     When no chunk clears the relevance threshold, ai-query says the documentation does
#     not cover the question, lists the nearest sources, and calls no model.
#
# DESIGN PRINCIPLES
#   Search Is The Trustworthy Mode
#     Verbatim chunks cannot be misquoted; --search works without any model server and,
#     because it only reads the index, even with AI_ENABLED=false.
#   One Stable JSON Object
#     --json prints exactly one object whose keys other scripts may rely on: query, mode,
#     filters, results (path, kind, section, title, start_line, end_line, score, text),
#     confident, and when an answer was generated: answer, sources, reasoning,
#     prompt_tokens, completion_tokens, tok_s, timings, profile, not_covered, findings (the
#     code profile's scanner findings; null for profiles that draft no shell). Unknown token
#     counts are null, never 0.
#   Degrade To Search
#     When the model server cannot be reached the search results are still printed, with a
#     one-line notice, so a question never ends with nothing.
#
# OPERATIONAL SAFEGUARDS
#   No Raw Control Characters
#     Human output shows control characters from documents and model output as escapes
#     (\x1b), so an ESC/OSC sequence in a tracked file or an answer cannot set the clipboard,
#     the window title or move the cursor; --json escapes them as JSON does.
#   Generation Is Gated
#     Asking a model requires AI_ENABLED=true; with it false, ai-query explains that and
#     exits 0, and only --search runs, embedding the question with the local embedder.
#     Nothing is sent anywhere while AI is off: with a remote embedding backend, --search
#     too waits for AI_ENABLED=true.
#   Read-Only Index
#     The index is opened read-only; ai-query never builds, changes or locks it, so it can
#     run while ai-index is writing and sees the last complete index.
#   Ledger Only When Asked
#     A token ledger row is written only with both --token-db and --token-host, only for a
#     completed answer, with unknown counts left empty; ai-query never prunes the ledger.
#   Wrong Index Refused
#     An index built with another embedding model is refused (exit 65) rather than ranked
#     with vectors from a different space.
#
# CONFIGURATION
#   AI_ENABLED
#     false (the default) allows --search only; true allows generation.
#   AI_DATA_DIR
#     Where the indexes live, one per repository (AI_DATA_DIR/indexes/), written by ai-index.
#   AI_EMBED_BACKEND, AI_EMBED_MODEL
#     Must match the index; the local default embeds the question offline.
#   AI_GEN_BACKEND, AI_GEN_MODEL, AI_OLLAMA_HOSTS, AI_OPENAI_BASE_URL
#     The model server that writes answers.
#   AI_TOP_K
#     Chunks retrieved when -k is not given (default 5).
#   AI_MIN_SCORE
#     The relevance threshold; 0 uses the calibrated default of the search module.
#   AI_MIN_MARGIN
#     "Not covered" relative to the index (best match over the 50th best, less a cost for
#     question words the best results miss); 0: the default.
#   AI_SUMMARIES, AI_SUMMARY_VERBATIM_DOCS, AI_QUERY_SUMMARY_DOCS, AI_QUERY_SUMMARY_SECONDS
#     When results do not fit the context, documents after the first few go as summaries
#     (with query: made for the question by the model, bounded in count and seconds).
#
# RUNTIME MODES
#   ai-query "question"
#     Retrieve, then generate an answer streamed to the terminal; sources after it.
#   --search
#     Print the matching chunks verbatim with their places and scores; no model is used.
#   --kind KIND, --section NAME, --source NAME, -k N
#     Hard filters (they compose) and the number of chunks. --source keeps one source:
#     repo (the homelab repository) or a name from AI_SOURCES.
#   --similar PATH[#heading]
#     The sections nearest to that file or section, never the file's own (stored vectors,
#     no model, works with AI_ENABLED=false).
#   --summary PATH
#     Print the stored summary of one indexed file (AI_SUMMARIES, made by ai-index
#     --summaries) with the model that made it and when; 66 when it has none. No model is
#     asked; works with AI_ENABLED=false.
#   --json
#     Print one JSON object (the schema above) instead of text.
#   --history FILE
#     A JSON list of {role, content}: the conversation before this question.
#   --profile NAME
#     The chat profile answering (default varaverk).
#   --show-reasoning
#     Print the model's reasoning (dimmed, on stderr) as it arrives.
#   --token-db PATH --token-host NAME
#     Append one ledger row per completed answer (profile as answered, source cli).
#   --config PATH
#     Another conf file.
#   Exit codes
#     0 answered, not covered, or AI disabled; 2 usage (also an unknown --kind or profile);
#     65 index of another model; 66 no usable index (run ai-index); 69 no model server
#     (search results printed); 78 configuration error; 130 Ctrl-C; 1 anything else, with
#     the traceback in the log. With --json, stdout holds one object even then, with "error".
"""ai-query: answer a question from the indexed documentation (see the header above).

JSON output (``--json``), one object, stable keys::

    {
      "query": str,                  # the question as given
      "search_query": str,           # what was searched (the follow-up rewrite, if any)
      "mode": "search" | "answer",
      "filters": {"kind": str|null, "section": str|null, "k": int, "profile": str},
      "confident": bool,             # the relevance threshold was met
      "results": [{"path", "kind", "section", "title", "start_line", "end_line",
                   "score", "text"}, ...],
      # mode "answer" only:
      "answer": str, "sources": [{"citation", "path", "section", "title", "start_line",
                                  "end_line", "score"}],
      "reasoning": str, "prompt_tokens": int|null, "completion_tokens": int|null,
      "tok_s": float|null, "timings": {"retrieval_s", "first_token_s", "generation_s",
                                        "total_s"}, "profile": str, "not_covered": bool,
      "findings": [{"rule", "line", "reason", "snippet", ...}] | null,  # code profile only
      "prompt_cut": bool,            # the model server cut the prompt to its context window
      # when the run failed (any exit code but 0; "results" may then be empty):
      "error": {"message": str, "kind": str}
    }
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from varaverk import cli
from varaverk import exitcodes
from varaverk.answering.profiles import get_profile
from varaverk.cli import HelpFormatter
from varaverk.config import add_config_option, load_settings
from varaverk.documents.chunks import KINDS
from varaverk.errors import UsageError, VaraverkError, exit_code_for_kind
from varaverk.logs import setup_logging
from varaverk.named_sources import all_sources, names_of_types
from varaverk.retrieval.similar import SectionNotFound, similar
from varaverk.terminal import human_output

DIM = "\033[2m"
RESET = "\033[0m"


def build_parser() -> argparse.ArgumentParser:
    """The ``ai-query`` command line (question words, retrieval filters, profile, output)."""
    p = argparse.ArgumentParser(
        prog="ai-query",
        description="Answer a question from the repository's indexed documentation, with "
                    "sources. --search prints the matching chunks verbatim and needs no model.",
        formatter_class=HelpFormatter,
        epilog=exitcodes.epilog(exitcodes.OK, exitcodes.FAILURE, exitcodes.USAGE,
                                exitcodes.MISMATCH, exitcodes.NO_INDEX, exitcodes.UNAVAILABLE,
                                exitcodes.CONFIG, exitcodes.INTERRUPTED))
    p.add_argument("question", nargs="*", help="the question (several words are joined)")
    p.add_argument("--search", action="store_true",
                   help="print the matching chunks verbatim; generate nothing")
    p.add_argument("--kind", choices=KINDS, help="only chunks of this kind")
    p.add_argument("--section", help="only chunks of this section (e.g. CONFIGURATION)")
    p.add_argument("--source", metavar="NAME",
                   help="only chunks of this source (repo, or a name from AI_SOURCES)")
    p.add_argument("--similar", metavar="PATH[#heading]",
                   help="list the sections nearest to this one, from other files (no model)")
    p.add_argument("--summary", metavar="PATH",
                   help="print the stored summary of one indexed file (no model is asked)")
    p.add_argument("-k", type=int, default=None, metavar="N",
                   help="chunks to retrieve (default: AI_TOP_K, 5)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--history", metavar="FILE",
                   help="JSON list of {role, content}: the conversation so far")
    p.add_argument("--profile", default="varaverk",
                   help="chat profile: varaverk (default), chat, code or troubleshoot")
    p.add_argument("--log", metavar="PATH",
                   help="with --profile troubleshoot: the log to read first (only from under "
                        "AI_TROUBLESHOOT_LOG_DIRS)")
    p.add_argument("--show-reasoning", action="store_true",
                   help="print the model's reasoning (dimmed, stderr)")
    p.add_argument("--token-db", metavar="PATH", help="append a ledger row per completed answer")
    p.add_argument("--token-host", metavar="NAME", help="host name for the ledger row")
    add_config_option(p)
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    return p


def read_history(path: str) -> list[dict]:
    """The --history file: a JSON list of {role: user|assistant, content: str}.

    Raises ValueError with the reason when the file is not that.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read history {path}: {exc}") from None
    if not isinstance(data, list):
        raise ValueError(f"history {path}: expected a JSON list of {{role, content}}")
    for i, m in enumerate(data):
        if not (isinstance(m, dict) and m.get("role") in ("user", "assistant", "system")
                and isinstance(m.get("content"), str)):
            raise ValueError(f"history {path}: item {i} is not {{role: user|assistant, "
                             f"content: text}}")
    return [m for m in data if m["role"] in ("user", "assistant")]


def _print_results(results: list[dict], out=None) -> None:
    out = out or sys.stdout
    if not results:
        print("No matching documentation.", file=out)
        return
    for i, r in enumerate(results, start=1):
        place = " \u203a ".join(x for x in (r["path"], r["section"], r["title"]) if x)
        print(f"{i}. {place}  (lines {r['start_line']}-{r['end_line']}, {r['kind']}, "
              f"score {r['score']:.4f})", file=out)
        for line in r["text"].rstrip().splitlines():
            print(f"   {line}", file=out)
        print(file=out)


def _print_sources(sources: list[dict], title: str = "Sources:", out=None) -> None:
    out = out or sys.stdout
    if not sources:
        return
    print(title, file=out)
    for s in sources:
        print(f"  [{s['citation']}] lines {s['start_line']}-{s['end_line']}", file=out)


def _print_findings(findings: list[dict] | None, out=sys.stdout) -> None:
    # The code profile's drafted shell, as the dock shows it: what would be destructive.
    if findings is None:
        return
    if not findings:
        print("Scanner: no destructive operations found in the drafted shell.", file=out)
        return
    print("Scanner findings (destructive operations in the drafted shell):", file=out)
    for f in findings:
        print(f"  line {f.get('line', '?')}: {f.get('reason', '')}", file=out)
        if f.get("snippet"):
            print(f"    {f['snippet']}", file=out)


def main(argv: list[str] | None = None) -> int:
    """Entry point: parse, gate, retrieve, answer; returns an exit code (header: Exit codes).

    Human output (not ``--json``) goes through ``terminal.SafeWriter``: a control character
    from a document or the model is shown as ``\\x1b``, never sent to the terminal raw.
    """
    return cli.run("ai-query", _main, argv)


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    with human_output(enabled=not args.json):
        return _run(parser, args)


def _run(parser, args) -> int:
    question = " ".join(args.question).strip()
    if not question and not (args.similar or args.summary):
        parser.error("the question is empty")
    if args.k is not None and args.k < 1:
        parser.error("-k must be at least 1")
    if bool(args.token_db) != bool(args.token_host):
        parser.error("--token-db and --token-host go together")
    settings = load_settings(args.config)
    setup_logging(settings, "ai-query", verbose=args.verbose, quiet=not args.verbose,
                  to_file=settings.ai_enabled)
    if args.similar:
        return _similar(args, settings)
    if args.summary:
        return _summary(args, settings)
    refusal = _gate(settings, args)
    if refusal:
        print(f"ai-query: {refusal}", file=sys.stderr)
        return exitcodes.OK
    filters = {"kind": args.kind, "section": args.section, "k": args.k or settings.ai_top_k,
               "profile": args.profile, "source": args.source}
    try:
        try:
            history = read_history(args.history) if args.history else []
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        from varaverk.retrieval.search import Retriever  # numpy: not on --help, --similar
        get_profile(args.profile)
        _check_source(args.source, settings)
        retriever = Retriever(settings)
        if args.search:
            return _search(args, settings, retriever, question, history, filters)
        return _answer(args, settings, retriever, question, history, filters)
    except Exception as exc:
        # --json promises one object on stdout whatever happens; varaverk.cli.run then reports
        # the error on stderr and exits with its code.
        if args.json:
            kind = exc.kind if isinstance(exc, VaraverkError) else "failure"
            message = exc.one_line() if isinstance(exc, VaraverkError) else str(exc)
            _print_json({"query": question, "search_query": question,
                         "mode": "search" if args.search else "answer", "filters": filters,
                         "confident": False, "results": [],
                         "error": {"message": message, "kind": kind}})
        raise


def _check_source(name: str | None, settings) -> None:
    """Raise UsageError when ``--source`` names no configured source (it would match nothing)."""
    names = [s.name for s in all_sources(settings)]
    if name is not None and name not in names:
        raise UsageError(f"--source {name!r} is not a configured source; choose one of "
                         f"{', '.join(names)} (AI_SOURCES adds more)")


def _gate(settings, args) -> str:
    """Why this run must not go on while AI is off ("" when it may)."""
    if not settings.ai_enabled and not args.search:
        return ("AI_ENABLED is false, so no model is asked. Set AI_ENABLED=true to generate "
                "answers; --search works on an existing index regardless.")
    if not settings.ai_enabled and settings.ai_embed_backend != "local":
        return (f"AI_ENABLED is false and the question would be embedded by the "
                f"{settings.ai_embed_backend} server; nothing is sent anywhere while AI is off. "
                f"Set AI_ENABLED=true (--search with the local embedder needs nothing).")
    return ""


def _print_json(data: dict) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2))


def _search(args, settings, retriever, question, history, filters) -> int:
    from varaverk.answering.rewrite import standalone_query  # imports search: numpy
    query = standalone_query(question, history)
    hits = retriever.search(query, filters["k"], kind=args.kind, section=args.section,
                            sources=_search_scope(args, settings))
    confident = retriever.confident(hits)
    results = [h.as_dict() for h in hits]
    if args.json:
        _print_json({"query": question, "search_query": query, "mode": "search",
                     "filters": filters, "confident": confident, "results": results})
        return exitcodes.OK
    if hits and not confident:
        print("(Nothing clears the relevance threshold: the documentation may not cover this. "
              "Nearest chunks:)\n")
    _print_results(results)
    return exitcodes.OK


def _search_scope(args, settings) -> tuple[str, ...]:
    """--source, else the sources of the profile's types (varaverk: the repository)."""
    if args.source:
        return (args.source,)
    return names_of_types(settings, get_profile(args.profile).source_types)


def _similar(args, settings) -> int:
    """--similar: the nearest other sections, from the stored vectors (no model)."""
    from varaverk.index.store.index import Index  # sqlite3: not on --help

    try:
        with Index.open(settings.index_path, readonly=True) as idx:
            hits = similar(idx, args.similar, args.k or settings.ai_top_k,
                           sources=(args.source,) if args.source else None)
    except SectionNotFound as exc:
        raise UsageError(str(exc)) from None
    results = [h.as_dict() for h in hits]
    if args.json:
        _print_json({"similar": args.similar, "mode": "similar", "results": results})
    else:
        _print_results(results)
    return exitcodes.OK


def _summary(args, settings) -> int:
    """--summary PATH: the stored summary, its model and date (66 when there is none)."""
    from varaverk.index.store.index import Index  # sqlite3: not on --help
    from varaverk.summaries.summary_pass import summary_model

    with Index.open(settings.index_path, readonly=True) as idx:
        found = idx.summary(args.summary)
    if found is None:
        print(f"ai-query: no summary of {args.summary!r} in the index (AI_SUMMARIES="
              f"{settings.ai_summaries}; make them with ai-index --summaries; the path is the "
              f"one sources show)", file=sys.stderr)
        return exitcodes.NO_INDEX
    stale = found.stale_content or found.model != summary_model(settings)
    if args.json:
        _print_json({"path": found.path, "mode": "summary", "model": found.model,
                     "made_at": found.made_at, "stale": stale, "summary": found.text})
        return exitcodes.OK
    print(f"Summary of {found.path} by {found.model}, made {found.made_at}"
          + (" (stale: the file or the summary model changed since)" if stale else "") + ":")
    print(found.text)
    return exitcodes.OK


class _Streamed:
    """What a turn's events left behind once printed live: the JSON object being built, and
    whether content was streamed, reclassified as reasoning, and how the turn ended."""

    def __init__(self, question: str, filters: dict):
        self.out: dict = {"query": question, "search_query": question, "mode": "answer",
                          "filters": filters, "confident": False, "results": [],
                          "findings": None}
        self.streamed = False
        self.reclassified = False
        self.error: dict | None = None
        self.done: dict | None = None


def _answer(args, settings, retriever, question, history, filters) -> int:
    """Run the turn, printing as it streams; then the error or the answer and its sources."""
    from varaverk.answering.answer import TurnRequest, run_turn  # imports search: numpy

    request = TurnRequest(profile=args.profile, question=question, history=history,
                          kind=args.kind, section=args.section, k=filters["k"],
                          log_path=args.log, source="cli", source_name=args.source)
    turn = _Streamed(question, filters)
    for event in run_turn(request, settings, retriever=retriever,
                          ledger_path=args.token_db, host=args.token_host):
        _show_event(args, turn, event.type, event.data)
    if turn.error is not None:
        return _show_error(args, turn)
    assert turn.done is not None  # run_turn always ends with done or error
    return _show_done(args, turn)


def _show_event(args, turn: _Streamed, type_: str, data: dict) -> None:
    """Print one live event (only bookkeeping with --json)."""
    live = not args.json
    if type_ == "sources":
        turn.out["results"] = data.get("results", [])
        turn.out["search_query"] = data.get("query", turn.out["query"])
        turn.out["confident"] = bool(data.get("confident"))
    elif type_ == "profile" and live:
        print(f"(answered by the {data['profile']} profile: {data.get('reason', '')})",
              file=sys.stderr)
    elif type_ == "thinking":
        turn.reclassified = turn.reclassified or bool(data.get("reclassified"))
        if args.show_reasoning and live:
            _show_reasoning(data["text"])
    elif type_ == "content" and live:
        sys.stdout.write(data["text"])
        sys.stdout.flush()
        turn.streamed = True
    elif type_ == "capability" and live:
        print(f"(used {data.get('name')}: {data.get('summary')})", file=sys.stderr)
    elif type_ == "findings":
        turn.out["findings"] = data.get("findings", [])
    elif type_ == "error":
        turn.error = data
    elif type_ == "done":
        turn.done = data


def _show_reasoning(text: str) -> None:
    """Reasoning on stderr, dimmed on a terminal."""
    if sys.stderr.isatty() and hasattr(sys.stderr, "write_styled"):
        sys.stderr.write_styled(DIM, text, RESET)
    else:
        sys.stderr.write(text)
    sys.stderr.flush()


def _show_error(args, turn: _Streamed) -> int:
    """The turn ended in an error event: say so (the search results instead when no model
    server answered); the exit code follows the error's kind."""
    error = turn.error or {}
    turn.out["error"] = {"message": error.get("message", ""), "kind": error.get("kind", "")}
    code = exit_code_for_kind(error.get("kind"))
    if args.json:
        _print_json(turn.out)
        return code
    if turn.streamed:
        print()
    if code == exitcodes.UNAVAILABLE:
        print(f"ai-query: no model server reachable ({error.get('message')}); "
              f"showing the search results instead.", file=sys.stderr)
        _print_results(turn.out["results"])
    else:
        print(f"ai-query: {error.get('message')}", file=sys.stderr)
    return code


def _show_done(args, turn: _Streamed) -> int:
    """The completed answer: the JSON object, or the not-covered note or the answer's end,
    the scanner's findings and the sources."""
    done = turn.done or {}
    turn.out.update({k: done.get(k) for k in ("answer", "sources", "reasoning", "prompt_tokens",
                                              "completion_tokens", "tok_s", "timings", "profile",
                                              "not_covered", "prompt_cut")})
    if args.json:
        _print_json(turn.out)
        return exitcodes.OK
    if done.get("not_covered"):
        print(done["answer"] + " Nothing in the index is relevant enough to answer from.")
        _print_sources(done.get("sources") or [], "Nearest sources:")
        return exitcodes.OK
    answer = done.get("answer") or ""
    if turn.reclassified or not turn.streamed:
        # What streamed turned out to be reasoning (a lone </think>): show the clean answer.
        if turn.streamed and sys.stdout.isatty():
            print("\n\nAnswer:")
        print(answer if answer else "(no answer: the model produced only reasoning)")
    elif not answer:
        print("\n(no answer: the model produced only reasoning)")
    else:
        print()
    if done.get("prompt_cut"):
        print("(the model server cut the prompt to its context window, so the model did not see "
              "all of the documentation: raise AI_GEN_NUM_CTX)", file=sys.stderr)
    if done.get("truncated"):
        print("(the answer was cut short by the model's length limit)", file=sys.stderr)
    print()
    _print_findings(turn.out["findings"])
    _print_sources(done.get("sources") or [])
    return exitcodes.OK


if __name__ == "__main__":
    sys.exit(main())
