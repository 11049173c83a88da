#!/usr/bin/env python3
# varaverk :: AI/ai_query.py
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
#     Generation goes through the chat worker (AI/answer.py) like the dock does:
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
#     Where the index lives (AI_DATA_DIR/index.sqlite), written by ai-index.
#   AI_EMBED_BACKEND, AI_EMBED_MODEL
#     Must match the index; the local default embeds the question offline.
#   AI_GEN_BACKEND, AI_GEN_MODEL, AI_OLLAMA_HOSTS, AI_OPENAI_BASE_URL
#     The model server that writes answers.
#   AI_TOP_K
#     Chunks retrieved when -k is not given (default 5).
#   AI_MIN_SCORE
#     The relevance threshold; 0 uses the calibrated default of the search module.
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
#     0 answered, not covered, or AI disabled; 2 usage; 65 index of another model;
#     66 no index (run ai-index); 69 no model server (search results printed);
#     78 configuration error; 1 anything else.
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
      # when generation failed (exit 69 or 1):
      "error": {"message": str, "kind": str}
    }
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from varaverk import exitcodes
from varaverk.config import add_config_option

DIM = "\033[2m"
RESET = "\033[0m"


def build_parser() -> argparse.ArgumentParser:
    """The ``ai-query`` command line (question words, retrieval filters, profile, output)."""
    p = argparse.ArgumentParser(
        prog="ai-query",
        description="Answer a question from the repository's indexed documentation, with "
                    "sources. --search prints the matching chunks verbatim and needs no model.",
        epilog="Exit codes: 0 ok / not covered / AI disabled, 2 usage, 65 index of another "
               "model, 66 no index (run ai-index), 69 no model server, 78 config error.")
    p.add_argument("question", nargs="*", help="the question (several words are joined)")
    p.add_argument("--search", action="store_true",
                   help="print the matching chunks verbatim; generate nothing")
    p.add_argument("--kind", help="only chunks of this kind (header, readme, manual, template, doc)")
    p.add_argument("--section", help="only chunks of this section (e.g. CONFIGURATION)")
    p.add_argument("--source", metavar="NAME",
                   help="only chunks of this source (repo, or a name from AI_SOURCES)")
    p.add_argument("--similar", metavar="PATH[#heading]",
                   help="list the sections nearest to this one, from other files (no model)")
    p.add_argument("-k", type=int, default=None, metavar="N", help="chunks to retrieve (default: AI_TOP_K, 5)")
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
    from varaverk.terminal import SafeWriter

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.json:
        return _run(parser, args)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = SafeWriter(sys.stdout), SafeWriter(sys.stderr)
    try:
        return _run(parser, args)
    finally:
        sys.stdout, sys.stderr = saved


def _run(parser, args) -> int:
    from varaverk.config import load_settings_or_report

    question = " ".join(args.question).strip()
    if not question and not args.similar:
        parser.error("the question is empty")
    if args.k is not None and args.k < 1:
        parser.error("-k must be at least 1")
    if bool(args.token_db) != bool(args.token_host):
        parser.error("--token-db and --token-host go together")
    settings = load_settings_or_report("ai-query", args.config)
    if settings is None:
        return exitcodes.CONFIG

    from varaverk.logs import setup_logging
    log = setup_logging(settings, "ai-query", verbose=args.verbose, quiet=not args.verbose,
                        to_file=settings.ai_enabled)

    if args.similar:
        return _similar(args, settings)
    if not settings.ai_enabled and not args.search:
        print("ai-query: AI_ENABLED is false, so no model is asked. Set AI_ENABLED=true to "
              "generate answers; --search works on an existing index regardless.",
              file=sys.stderr)
        return exitcodes.OK
    if not settings.ai_enabled and settings.ai_embed_backend != "local":
        print(f"ai-query: AI_ENABLED is false and the question would be embedded by the "
              f"{settings.ai_embed_backend} server; nothing is sent anywhere while AI is off. "
              f"Set AI_ENABLED=true (--search with the local embedder needs nothing).",
              file=sys.stderr)
        return exitcodes.OK
    try:
        history = read_history(args.history) if args.history else []
    except ValueError as exc:
        print(f"ai-query: {exc}", file=sys.stderr)
        return exitcodes.USAGE
    try:
        from varaverk.profiles import UnknownProfile, get_profile
        get_profile(args.profile)
    except UnknownProfile as exc:
        print(f"ai-query: {exc}", file=sys.stderr)
        return exitcodes.USAGE

    from varaverk.store import IndexCorrupt, IndexMismatch, IndexMissing
    from varaverk.embedding import EmbeddingError, EmbeddingUnavailable
    from varaverk.search import Retriever
    try:
        retriever = Retriever(settings)
    except (IndexMissing, IndexCorrupt, IndexMismatch, EmbeddingUnavailable) as exc:
        print(f"ai-query: {exc}", file=sys.stderr)
        if isinstance(exc, IndexMismatch):
            return exitcodes.MISMATCH
        return exitcodes.UNAVAILABLE if isinstance(exc, EmbeddingUnavailable) else exitcodes.NO_INDEX

    k = args.k or settings.ai_top_k or 5
    filters = {"kind": args.kind, "section": args.section, "k": k, "profile": args.profile,
               "source": args.source}
    try:
        if args.search:
            return _search(args, settings, retriever, question, history, filters)
        return _answer(args, settings, retriever, question, history, filters)
    except EmbeddingUnavailable as exc:
        print(f"ai-query: {exc}", file=sys.stderr)
        return exitcodes.UNAVAILABLE
    except EmbeddingError as exc:
        print(f"ai-query: embedding the question failed: {exc}", file=sys.stderr)
        return exitcodes.FAILURE
    except KeyboardInterrupt:
        return 130
    except Exception:
        log.exception("ai-query failed")
        return exitcodes.FAILURE


def _search(args, settings, retriever, question, history, filters) -> int:
    from varaverk.rewrite import standalone_query
    query = standalone_query(question, history)
    hits = retriever.search(query, filters["k"], kind=args.kind, section=args.section,
                            sources=_search_scope(args, settings))
    confident = retriever.confident(hits)
    results = [h.as_dict() for h in hits]
    if args.json:
        print(json.dumps({"query": question, "search_query": query, "mode": "search",
                          "filters": filters, "confident": confident, "results": results},
                         ensure_ascii=False, indent=2))
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
    from varaverk.named_sources import names_of_types
    from varaverk.profiles import get_profile
    return names_of_types(settings, get_profile(args.profile).source_types)


def _similar(args, settings) -> int:
    """--similar: the nearest other sections, from the stored vectors (no model)."""
    from varaverk.similar import SectionNotFound, similar
    from varaverk.store import Index, IndexCorrupt, IndexMissing
    try:
        with Index.open(settings.index_path, readonly=True) as idx:
            hits = similar(idx, args.similar, args.k or settings.ai_top_k or 5,
                           sources=(args.source,) if args.source else None)
    except (IndexMissing, IndexCorrupt) as exc:
        print(f"ai-query: {exc}", file=sys.stderr)
        return exitcodes.NO_INDEX
    except SectionNotFound as exc:
        print(f"ai-query: {exc}", file=sys.stderr)
        return exitcodes.USAGE
    results = [h.as_dict() for h in hits]
    if args.json:
        print(json.dumps({"similar": args.similar, "mode": "similar", "results": results},
                         ensure_ascii=False, indent=2))
    else:
        _print_results(results)
    return exitcodes.OK


def _answer(args, settings, retriever, question, history, filters) -> int:
    from varaverk.answer import TurnRequest, run_turn

    request = TurnRequest(profile=args.profile, question=question, history=history,
                          kind=args.kind, section=args.section, k=filters["k"],
                          log_path=args.log, source="cli", source_name=args.source)
    tty = sys.stdout.isatty()
    err_tty = sys.stderr.isatty()
    out: dict = {"query": question, "search_query": question, "mode": "answer",
                 "filters": filters, "confident": False, "results": [], "findings": None}
    streamed = False
    reclassified = False
    error = None
    done = None
    for event in run_turn(request, settings, retriever=retriever,
                          ledger_path=args.token_db, host=args.token_host):
        data = event.data
        if event.type == "sources":
            out["results"] = data.get("results", [])
            out["search_query"] = data.get("query", question)
            out["confident"] = bool(data.get("confident"))
        elif event.type == "profile" and not args.json:
            print(f"(answered by the {data['profile']} profile: {data.get('reason', '')})",
                  file=sys.stderr)
        elif event.type == "thinking":
            reclassified = reclassified or bool(data.get("reclassified"))
            if args.show_reasoning and not args.json:
                if err_tty and hasattr(sys.stderr, "write_styled"):
                    sys.stderr.write_styled(DIM, data["text"], RESET)
                else:
                    sys.stderr.write(data["text"])
                sys.stderr.flush()
        elif event.type == "content" and not args.json:
            sys.stdout.write(data["text"])
            sys.stdout.flush()
            streamed = True
        elif event.type == "capability" and not args.json:
            print(f"(used {data.get('name')}: {data.get('summary')})", file=sys.stderr)
        elif event.type == "findings":
            out["findings"] = data.get("findings", [])
        elif event.type == "error":
            error = data
        elif event.type == "done":
            done = data

    if error is not None:
        out["error"] = {"message": error.get("message", ""), "kind": error.get("kind", "")}
        unavailable = error.get("kind") == "unavailable"
        if args.json:
            print(json.dumps(out, ensure_ascii=False, indent=2))
        else:
            if streamed:
                print()
            if unavailable:
                print(f"ai-query: no model server reachable ({error.get('message')}); "
                      f"showing the search results instead.", file=sys.stderr)
                _print_results(out["results"])
            else:
                print(f"ai-query: {error.get('message')}", file=sys.stderr)
        if unavailable:
            return exitcodes.UNAVAILABLE
        return {"no_index": exitcodes.NO_INDEX, "mismatch": exitcodes.MISMATCH}.get(
            error.get("kind"), exitcodes.FAILURE)

    assert done is not None  # run_turn always ends with done or error
    out.update({k: done.get(k) for k in ("answer", "sources", "reasoning", "prompt_tokens",
                                         "completion_tokens", "tok_s", "timings", "profile",
                                         "not_covered", "prompt_cut")})
    if args.json:
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return exitcodes.OK
    if done.get("not_covered"):
        print(done["answer"] + " Nothing in the index is relevant enough to answer from.")
        _print_sources(done.get("sources") or [], "Nearest sources:")
        return exitcodes.OK
    answer = done.get("answer") or ""
    if reclassified or not streamed:
        # What streamed turned out to be reasoning (a lone </think>): show the clean answer.
        if streamed and tty:
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
    _print_findings(out["findings"])
    _print_sources(done.get("sources") or [])
    return exitcodes.OK


if __name__ == "__main__":
    sys.exit(main())
