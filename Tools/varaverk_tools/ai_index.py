#!/usr/bin/env python3
# Varaverk :: Tools/varaverk_tools/ai_index.py
# Build and refresh the retrieval index of a repository's tracked documentation.
#
# PURPOSE
#   ai-index turns the documentation a git repository tracks into the index that ai-query and
#   the dock search: script headers split into their six sections and named paragraphs,
#   README-*.md, Manual-*.md and every other Markdown and reStructuredText file by heading
#   (changelogs and licences left out), commented configuration by group and key. Each
#   chunk is embedded and stored with its vector in one SQLite file under AI_DATA_DIR, so a
#   question can be answered from the repository's own words, with the place each answer came
#   from.
#
# OPERATIONAL MODEL
#   The run lists the repository with git ls-files -z -s, classifies every path by the
#   AI_GLOBS_* settings and compares each document with its stored size and mtime. If nothing
#   moved, HEAD is unchanged and the embedding settings are the same, it stops there without
#   taking the lock, reading a file or loading the embedder, and records every input of that
#   verdict with its value (the settings' sources, HEAD, the stats of the git index file and
#   of every tracked path); a later plain run that finds every value the same ends even
#   sooner, without loading the settings, with the same log line. Otherwise it takes the index
#   lock, reads the changed files, hashes them, re-chunks and re-embeds only those whose
#   content really changed, drops the chunks of deleted and renamed files, and commits the
#   whole run in one SQLite transaction. Files are read, chunked, embedded and written into
#   that open transaction in batches of AI_INDEX_BATCH chunks, so the memory a run holds is a
#   batch, not the repository. --force rebuilds every chunk the same way.
#
# DESIGN PRINCIPLES
#   Tracked Documentation Only
#     Only paths git ls-files lists are considered, and of those only the documentation kinds.
#     Script bodies, git-ignored configuration and untracked drafts are never read, so live
#     secrets cannot reach the index.
#   Stat Before Read, Hash Before Embed
#     An unchanged size and mtime means the file is not even opened; a changed mtime with the
#     same content costs a hash, never an embedding. Embedding is the expensive step, so the
#     run spends time there and almost nowhere else.
#   One Model Per Index
#     The index records the embedding backend, model and dimension. Vectors of two models are
#     never mixed in one index, because their similarities mean nothing to each other.
#
# OPERATIONAL SAFEGUARDS
#   Index Lock Against Overlapping Runs
#     Two index runs never overlap: a run that has something to write holds an exclusive file
#     lock on <index>.lock (beside the repository's index file) for its whole run and records its
#     pid, host, start time and command beside it. A second run, for example a cron refresh
#     starting during a manual --force rebuild, waits up to AI_INDEX_LOCK_TIMEOUT seconds and
#     then exits with code 75, naming the run that holds the lock. The kernel releases the
#     lock if the holder dies, so a crash never leaves a stale lock behind.
#   All-Or-Nothing Commit
#     Everything a run writes is committed in one SQLite transaction at its end, however many
#     batches it was written in. A run that fails, is interrupted with Ctrl-C or loses its
#     embedding server midway leaves the previous index whole and searchable.
#   Model Mismatch Refusal
#     When AI_EMBED_BACKEND or AI_EMBED_MODEL name another model than the index was built
#     with, the run stops with code 65 before embedding anything and says to rebuild with
#     --force. Queries never compare vectors of different lengths.
#   Bad Input Costs One File
#     A binary file is skipped with a warning, a file that is not UTF-8 is decoded as cp1252
#     with a warning naming it, and a chunk the embedding server refuses is split or recorded
#     against its file and retried next run. One bad file never aborts the run; a run in
#     which no chunk got a vector at all exits 70, so a cron wrapper notices.
#   Symlinks And Submodules Are Not Followed
#     Submodule gitlinks are skipped by their mode, symbolic links are never followed (one
#     could lead outside the repository or into git-ignored configuration), and files deleted
#     from the work tree lose their chunks instead of failing the run.
#   Summaries Never Block The Index
#     The summary pass holds its own lock (<index>.summaries.lock), never the index lock, so a
#     refresh is not kept waiting behind a long model pass; a summary whose file changed
#     meanwhile is stale by its content hash and is remade, never shown as current.
#   Disabled By Default
#     With AI_ENABLED=false the run logs one line and exits 0 without touching anything;
#     --dry-run and --status still work because they contact nothing and write nothing.
#
# CONFIGURATION
#   AI_ENABLED
#     Master switch; false (the default) makes a refresh a logged no-op.
#   AI_REPO_ROOT
#     The repository whose tracked documentation is indexed (default: the one this tool
#     runs from).
#   AI_SOURCES
#     More git work trees indexed beside it, NAME=TYPE:PATH (TYPE repo, notes or chats),
#     each only from its own git ls-files; one index, each chunk naming its source.
#   AI_DATA_DIR
#     Folder of the index files, one per repository (indexes/<name>-<hash>.sqlite, keyed by
#     the repository's resolved path), their locks and the no-op runs' records
#     (fingerprints/; default: ~/.local/share/varaverk).
#   AI_LOG_DIR
#     Folder of ai-index.log, rotated at 1 MiB (default: ~/.local/state/varaverk/log).
#   AI_EMBED_BACKEND
#     local (offline all-MiniLM-L6-v2, the default), ollama or openai.
#   AI_EMBED_MODEL
#     The embedding model; empty means the backend's default.
#   AI_EMBED_BATCH
#     Chunks per embedding request (default: 32).
#   AI_INDEX_BATCH
#     Chunks read before they are embedded and written into the run's transaction (default:
#     512); bounds the run's memory, whatever the repository's size.
#   AI_INDEX_LOCK_TIMEOUT
#     Seconds a run waits for another run's lock before giving up with code 75 (default: 60).
#   AI_SUMMARIES
#     off (the default), extractive or model: which document summaries --summaries makes
#     (query stores extractive ones; answers then summarise for each question).
#   AI_SUMMARY_SECONDS
#     Seconds one --summaries run may spend before it stops (default: 600; 0: no bound).
#   AI_CONTEXTUAL_CHUNKS
#     Embed each chunk with its document's title and first sentence (default: false; switching
#     it needs --force, like another embedding model).
#   AI_GLOBS_HEADER
#     Space-separated globs of scripts whose six-section header is indexed; AI_GLOBS_README,
#     AI_GLOBS_MANUAL, AI_GLOBS_TEMPLATE and AI_GLOBS_DOC do the same for the other kinds.
#
# RUNTIME MODES
#   (no option)
#     Incremental refresh: only new, changed and deleted documents cost work.
#   --force
#     Rebuild every chunk from scratch, also to switch the embedding model.
#   --dry-run
#     List what would be indexed, per kind, with chunk counts; contacts no server and
#     writes nothing, not even the data folder or the log.
#   --summaries
#     Summarise every indexed file that lacks a current summary (AI_SUMMARIES), one file per
#     transaction, within AI_SUMMARY_SECONDS; killed or stopped, the next run goes on where
#     this one was. An unchanged file is never summarised twice; another model remakes all.
#     With AI_SUMMARIES=model each request's tokens are a row of this host's token ledger
#     (profile summary, source ai-index).
#   --status
#     Show the index size, files and chunks per kind, skipped files with reasons, the
#     embedding backend, model and dimension, the last build and whether the index is behind
#     the repository; --json prints the same as one JSON object.
"""ai-index: the entry point (``ai-index`` console script, or
``python Tools/varaverk_tools/ai_index.py``)."""

from __future__ import annotations

import sys
import time

# The indexer, the embedders, json, argparse, logging (varaverk.cli) and even the settings
# (varaverk.config: typing, pathlib, python-dotenv) are imported by the step that needs them: a
# refresh whose recorded inputs are all unchanged (_up_to_date) loads none of them, so that it
# stays near the cost of git ls-files (tests/benchmarks/bench_refresh.py; README, "Start-up
# path").
from varaverk import exitcodes
from varaverk.index import fingerprint
from varaverk.index.report import timed_summary
from varaverk.log_files import append_line

EPILOG = """\
modes:
  (default)   incremental refresh: unchanged files are not read, unchanged content is not
              re-embedded, deleted and renamed files lose their chunks
  --force     full rebuild (also required after changing AI_EMBED_BACKEND/AI_EMBED_MODEL
              or AI_CONTEXTUAL_CHUNKS)
  --dry-run   list what would be indexed per kind with chunk counts; no server, no writes
  --status    what the index holds and whether it is behind the repository
  --summaries summarise the files lacking a current summary (AI_SUMMARIES), within
              AI_SUMMARY_SECONDS; resumable: each summary is committed on its own

""" + exitcodes.epilog(exitcodes.OK, exitcodes.FAILURE, exitcodes.USAGE, exitcodes.MISMATCH,
                       exitcodes.NO_INDEX, exitcodes.UNAVAILABLE, exitcodes.EMBED_FAILED,
                       exitcodes.LOCKED, exitcodes.CONFIG, exitcodes.INTERRUPTED)


def build_parser():
    """The command line of ai-index (an ``argparse.ArgumentParser``)."""
    import argparse

    from varaverk.cli import HelpFormatter
    from varaverk.config import add_config_option

    parser = argparse.ArgumentParser(
        prog="ai-index", formatter_class=HelpFormatter, epilog=EPILOG,
        description="Index the tracked documentation of a git repository for ai-query and the "
                    "dock: script headers, commented configuration and every Markdown and "
                    "reStructuredText file, embedded into one SQLite file under AI_DATA_DIR.")
    add_config_option(parser)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--force", action="store_true", help="rebuild the whole index")
    mode.add_argument("--dry-run", action="store_true",
                      help="show what would be indexed; contact nothing, write nothing")
    mode.add_argument("--status", action="store_true", help="show what the index holds")
    mode.add_argument("--summaries", action="store_true",
                      help="make the missing and stale document summaries (AI_SUMMARIES)")
    parser.add_argument("--json", action="store_true",
                        help="with --status or --dry-run: print one JSON object")
    noise = parser.add_mutually_exclusive_group()
    noise.add_argument("-v", "--verbose", action="store_true", help="debug output")
    noise.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ai-index; returns the exit code (see ``EPILOG``)."""
    code = _up_to_date(sys.argv[1:] if argv is None else list(argv))
    if code is not None:
        return code
    from varaverk import cli

    return cli.run("ai-index", _main, argv)


def _up_to_date(args: list[str]) -> int | None:
    """A plain refresh (``[-q] [--config PATH]``) whose every input is as recorded when the last
    full run found nothing to do (``varaverk.index.fingerprint``): the same log line as that
    run, exit code OK. None: the full path decides and reports (another command line, a
    changed input, an error of any kind)."""
    plain = _plain_refresh(args)
    if plain is None:
        return None
    quiet, config = plain
    started = time.monotonic()
    try:
        found = fingerprint.unchanged_summary(config)
        if found is None:
            return None
        head, log_dir = found
        message = timed_summary(head, time.monotonic() - started)
        append_line(log_dir, "ai-index", "INFO", message)  # recorded only when nothing to hide
    except KeyboardInterrupt:
        from varaverk import logs
        logs.report_error("ai-index", "interrupted (Ctrl-C)")
        return exitcodes.INTERRUPTED
    except Exception:  # noqa: BLE001 - the full path meets it again and reports it
        return None
    if not quiet:
        print(f"ai-index: {message}", file=sys.stderr)  # printable, checked when recorded
    return exitcodes.OK


def _plain_refresh(args: list[str]) -> tuple[bool, str | None] | None:
    """``(quiet, config path)`` when ``args`` ask for a plain refresh (``-q``/``--quiet``,
    ``--config PATH``), else None (argparse reads every other command line)."""
    quiet, config, rest = False, None, list(args)
    while rest:
        arg = rest.pop(0)
        if arg in ("-q", "--quiet"):
            quiet = True
        elif arg == "--config" and rest and not rest[0].startswith("-"):
            config = rest.pop(0)
        elif arg.startswith("--config=") and len(arg) > len("--config="):
            config = arg.partition("=")[2]
        else:
            return None
    return quiet, config


def _main(argv: list[str] | None) -> int:
    from varaverk.config import load_settings
    from varaverk.config_inputs import Inputs
    from varaverk.logs import setup_logging
    from varaverk.terminal import human_output

    args = build_parser().parse_args(argv)
    inputs = Inputs(args.config)  # what the settings come from: the next no-op checks them
    settings = load_settings(args.config, inputs=inputs)
    if args.dry_run or args.status:
        setup_logging(settings, "ai-index", args.verbose, args.quiet, to_file=False)
        with human_output(enabled=not args.json):  # tracked names may hold ESC
            return _dry_run(settings, args) if args.dry_run else _status(settings, args)

    log = setup_logging(settings, "ai-index", args.verbose, args.quiet)
    if not settings.ai_enabled:
        log.info("AI_ENABLED is false: nothing indexed (set AI_ENABLED=true to enable)")
        return exitcodes.OK
    if args.summaries:
        return _summaries(settings, args, log)
    return _refresh(settings, args, log, inputs)


def _summaries(settings, args, log) -> int:
    """The summary pass (``varaverk.summaries.summary_pass``), progress on stderr."""
    if settings.ai_summaries == "off":
        log.error("AI_SUMMARIES is off: set it to extractive (no model needed) or model "
                  "to make document summaries")
        return exitcodes.CONFIG
    from varaverk.summaries.summary_pass import summarise

    try:
        report = summarise(settings, progress=None if args.quiet else _progress_printer(log))
    except KeyboardInterrupt:
        log.error("interrupted: every summary finished so far is kept; run again to go on")
        return exitcodes.INTERRUPTED
    for path, reason in report.failures:
        log.debug("no summary of %s: %s", path, reason)
    log.info("%s", report.summary())
    return exitcodes.OK


def _progress_printer(log):
    """``progress(done, total, path)``: a log line (stderr) per tenth of the work, and per file
    with --verbose."""
    shown = [-1]

    def progress(done: int, total: int, path: str) -> None:
        tenth = done * 10 // max(total, 1)
        if tenth != shown[0] or done == total:
            shown[0] = tenth
            log.info("summarised %d/%d files (%s)", done, total, path)
        else:
            log.debug("summarised %d/%d files (%s)", done, total, path)
    return progress


def _refresh(settings, args, log, inputs) -> int:
    """The refresh (``varaverk.index.refresh``); ``inputs``: what ``settings`` were loaded
    from (``config_inputs.Inputs``), recorded when it finds nothing to do."""
    from varaverk.index.refresh import refresh

    try:
        report = refresh(settings, None, force=args.force,
                         progress=False if args.quiet else None, inputs=inputs)
    except KeyboardInterrupt:
        log.error("interrupted: nothing was written, the previous index is unchanged")
        return exitcodes.INTERRUPTED
    except Exception as exc:
        from varaverk.embedding import EmbeddingError, EmbeddingUnavailable
        if not isinstance(exc, EmbeddingError):
            raise  # varaverk.cli.run reports it (its exit code, or 1 and the traceback)
        what = ("embedding server unavailable" if isinstance(exc, EmbeddingUnavailable)
                else "embedding failed")
        log.error("%s: %s — nothing was written, the previous index is unchanged", what, exc)
        return exc.exit_code
    if not report.tracked:
        log.info("the repository has no tracked files yet: 0 documents indexed")
        return exitcodes.OK
    for path, reason in report.skipped:
        log.debug("skipped %s: %s", path, reason)
    log.info("%s", report.summary())
    if report.chunks_failed and not (report.chunks_embedded or report.chunks_reused):
        log.error("no chunk got a vector: %d failed (the log names each failure; the files are "
                  "recorded and retried on the next run)", report.chunks_failed)
        return exitcodes.EMBED_FAILED
    return exitcodes.OK


def _dry_run(settings, args) -> int:
    from varaverk.embedding import make_embedder
    from varaverk.index.plan import plan

    embedder = make_embedder(settings)  # nothing is contacted; local counts tokens offline
    result = plan(settings, embedder.count_tokens, embedder.max_tokens)
    result["embedder"] = {"backend": embedder.backend, "model": embedder.model,
                          "max_tokens": embedder.max_tokens}
    if args.json:
        return _print_json(result)
    print(f"dry run: {result['repo_root']} (HEAD {result['head'] or 'none: no commits yet'}), "
          f"{result['tracked']} tracked files{_in_sources(result)}; nothing contacted, "
          f"nothing written")
    print(f"embedder: {embedder.backend}/{embedder.model}, {embedder.max_tokens} tokens per chunk")
    for kind, counts in result["kinds"].items():
        print(f"  {kind:<9} {counts['files']:>5} files {counts['chunks']:>6} chunks")
    print(f"  {'total':<9} {len(result['files']):>5} files {result['chunks']:>6} chunks")
    for item in result["files"]:
        print(f"    {item['kind']:<9} {item['chunks']:>4}  {item['path']}")
    if result["skipped"]:
        print(f"skipped: {len(result['skipped'])}")
        for item in result["skipped"]:
            print(f"    {item['path']}: {item['reason']}")
    return exitcodes.OK


def _status(settings, args) -> int:
    from varaverk.index.status import status
    from varaverk.index.store.errors import IndexMissing

    try:
        info = status(settings)
    except IndexMissing as exc:
        if args.json:
            _print_json({"path": str(settings.index_path), "exists": False,
                         "message": str(exc)}, compact=True)
        else:
            print(f"ai-index: {exc}", file=sys.stderr)
        return exitcodes.NO_INDEX
    info["exists"] = True
    if settings.ai_summaries != "off":
        from varaverk.summaries.summary_pass import summary_status
        info["summaries"] = summary_status(settings)
    if args.json:
        return _print_json(info)
    meta, behind = info["meta"], info["behind"]
    print(f"index: {info['path']} of repository {meta.get('repo_root') or '?'} "
          f"({info['size_bytes'] / 1024:.0f} KiB, schema {meta.get('schema_version', '?')})")
    print(f"repository: {info['repository']['root']} "
          f"({info['repository']['tracked']} tracked files)")
    _print_sources(info.get("sources") or [])
    if meta.get("embed_backend"):
        print(f"embedder: {meta['embed_backend']}/{meta['embed_model']}, "
              f"{meta.get('embed_dimension', '?')} dimensions")
    else:
        print("embedder: none yet (no chunks embedded)")
    print(f"last build: {meta.get('built_at', 'never')} ({meta.get('last_run', '?')}), "
          f"took {float(meta.get('build_seconds') or 0):.1f} s, "
          f"HEAD {meta.get('head') or 'none'}")
    files = info["files"]
    print(f"files: {files.get('indexed', 0)} indexed, {files.get('partial', 0)} partial, "
          f"{files.get('skipped', 0)} skipped, {info['tracked']} accounted for; "
          f"chunks: {info['chunks']}")
    for kind in sorted(set(info["files_by_kind"]) | set(info["chunks_by_kind"])):
        print(f"  {kind or '-':<9} {info['files_by_kind'].get(kind, 0):>5} files "
              f"{info['chunks_by_kind'].get(kind, 0):>6} chunks")
    for item in info["partial"]:
        print(f"  partial {item['path']}: {item['reason']}")
    _print_summaries(info.get("summaries"))
    for item in info.get("masked", ()):
        print(f"warning: {item['path']}: {item['reason']} — a secret committed by mistake? "
              "remove it from the repository")
    if info["skipped"]:
        print(f"skipped ({len(info['skipped'])}):")
        for item in info["skipped"]:
            print(f"  {item['path']}: {item['reason']}")
    if behind["behind"]:
        parts = []
        if behind["head_moved"]:
            parts.append(f"HEAD moved from {behind['stored_head'] or 'none'} to "
                         f"{info['repository']['head'] or 'none'}")
        for key in ("changed", "added", "removed"):
            if behind[key]:
                parts.append(f"{len(behind[key])} {key}")
        if parts:
            print("behind the repository: " + "; ".join(parts) + " — run ai-index")
        if behind["embedder_changed"]:
            print(f"the settings name another embedder ({behind['configured_embedder']}) than "
                  f"built the index — run ai-index --force to rebuild")
    else:
        print("up to date with the repository")
    return exitcodes.OK


def _print_summaries(counts: dict | None) -> None:
    """The summaries line of --status (AI_SUMMARIES on)."""
    if counts is None:
        return
    print(f"summaries ({counts['model']}): {counts['current']} of {counts['files']} files "
          f"summarised, {counts['stale']} stale, {counts['missing']} missing"
          + (" — run ai-index --summaries" if counts["stale"] or counts["missing"] else ""))


def _print_json(obj: dict, *, compact: bool = False) -> int:
    """Print ``obj`` as JSON for ``--json``: one line when ``compact``, else indented with
    non-ASCII kept; returns exit code OK."""
    import json  # only for --json: the no-op refresh never loads it

    print(json.dumps(obj) if compact else json.dumps(obj, indent=2, ensure_ascii=False))
    return exitcodes.OK


def _in_sources(result: dict) -> str:
    names = result.get("sources") or []
    return f" in {len(names)} sources ({', '.join(names)})" if len(names) > 1 else ""


def _print_sources(rows: list[dict]) -> None:
    """One line per source, when AI_SOURCES names any besides the repository."""
    if len(rows) < 2:
        return
    print("sources:")
    for row in rows:
        state = "behind" if row["behind"] else "up to date"
        print(f"  {row['name']:<10} {row['type']:<6} {row['files']:>5} files "
              f"{row['chunks']:>6} chunks {row['skipped']:>5} skipped  {state}  {row['root']}")


if __name__ == "__main__":
    sys.exit(main())
