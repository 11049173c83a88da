#!/usr/bin/env python3
# Varaverk :: Tools/varaverk_tools/ai_memory.py
# See, search, import, digest, recall and forget the assistant's long-term memory.
#
# PURPOSE
#   ai-memory is the operator's view of what Varaverk remembers between conversations. With
#   AI_MEMORY_ENABLED=true every turn of the chat and notes profiles is kept verbatim (secrets
#   redacted first) in AI_DATA_DIR/memory.db, digested in triplets of three consecutive turns
#   into facts and one recollection each, and recalled into later conversations. This
#   command lists and searches it, shows a triplet's facts, forgets one triplet, one
#   conversation or everything, exports it as JSON, imports past conversations from a chat
#   export, shows what a question would recall, and measures recall on a dev set.
#
# OPERATIONAL MODEL
#   One File Per Host
#     Memory is AI_DATA_DIR/memory.db, one SQLite file beside the index, never inside a
#     repository. Turns are never rewritten; triplets, facts (with their embedding vectors)
#     and recollections are derived from them and can be rebuilt (redigest).
#   Digest After The Fact
#     import stores the turns, then digests every triplet not yet digested; digest does only
#     the second step (the dock digests after each answer; this catches up). With
#     AI_MEMORY_DIGEST=model a failed or malformed model digest keeps the extractive digest
#     and is retried by the next digest, at most three times.
#   Recall Without Generation
#     recall embeds the question's facts and prints the voted triplets (turn ids, votes,
#     facts, recollections) and the prompt block they would make; no generation model is
#     called.
#
# DESIGN PRINCIPLES
#   The Words Are The Operator's
#     Everything remembered can be seen (list, show, export) and forgotten (forget), and
#     forgetting removes rows, vectors and search-index entries, not flags.
#   Same Embedder As The Index
#     Facts are embedded by AI_EMBED_BACKEND/AI_EMBED_MODEL, and a memory embedded by another
#     model refuses to mix (exit 65) until redigest embeds it again from the kept turns.
#   Measured, Not Guessed
#     eval runs a dev set in the LoCoMo/LongMemEval shape in a temporary memory and prints
#     evidence recall@1/@5 of votes beside nearest-neighbour and BM25 over turns.
#
# OPERATIONAL SAFEGUARDS
#   Redacted Before Stored
#     Imported and remembered text passes the capabilities' redaction (this host's secret
#     values, every secret shape, secrets told in prose) before anything is written.
#   Whole Triplets Only
#     A triplet is written in one transaction with its facts and recollection, so a run
#     killed at any moment loses no stored turn and leaves no half-written triplet.
#   Forget Everything Asks
#     forget --all needs --yes; writes (import, digest, redigest, forget) hold a lock on
#     memory.db.lock so two runs never interleave (exit 75 after AI_INDEX_LOCK_TIMEOUT).
#   Off Means Off
#     With AI_ENABLED=false nothing runs. With AI_MEMORY_ENABLED=false nothing new is
#     remembered (import, digest, redigest and recall refuse); what exists can still be
#     listed, exported and forgotten.
#
# CONFIGURATION
#   AI_MEMORY_ENABLED
#     Keep and recall memory at all (default false).
#   AI_MEMORY_DIGEST, AI_MEMORY_MODEL
#     model (default) or extractive; the model that digests (empty: AI_GEN_MODEL).
#   AI_MEMORY_BUDGET
#     Tokens of recalled memory one prompt may hold (default 600).
#   AI_EMBED_BACKEND, AI_EMBED_MODEL, AI_DATA_DIR
#     The embedder of facts and questions; where memory.db lives.
#
# RUNTIME MODES
#   ai-memory list [--conversation ID]
#     Conversations (turns, first and last time), or one conversation's triplets.
#   ai-memory search WORDS
#     Turns holding the words, best first.
#   ai-memory show TRIPLET
#     One triplet: its turns, facts and recollection.
#   ai-memory forget --triplet ID | --conversation ID | --all --yes
#     Remove turns, triplets, facts and vectors for good.
#   ai-memory export [FILE]
#     Everything as JSON (stdout, or FILE written atomically).
#   ai-memory import FILE
#     Past conversations from chat-export JSON ([{chat, sender, timestamp, text, id?}]).
#   ai-memory digest | redigest
#     Digest what is pending; or drop every digest and digest all turns again.
#   ai-memory recall [--json] [--conversation ID] QUESTION
#     What QUESTION would recall; never calls a generation model.
#   ai-memory eval DEVSET [--json]
#     Evidence recall@1/@5 for votes, nearest neighbour and BM25 on a dev set.
"""Long-term memory from the command line (see the header above)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from varaverk import cli, exitcodes
from varaverk.cli import HelpFormatter
from varaverk.config import add_config_option, load_settings_or_report
from varaverk.errors import UsageError
from varaverk.logs import setup_logging
from varaverk.terminal import neutralise

PROGRAM = "ai-memory"
# Commands that add to memory: refused while AI_MEMORY_ENABLED is false.
REMEMBERING = ("import", "digest", "redigest", "recall")
WRITING = ("import", "digest", "redigest", "forget")


def build_parser() -> argparse.ArgumentParser:
    """The ``ai-memory`` command line: one sub-command per action."""
    p = argparse.ArgumentParser(prog=PROGRAM, formatter_class=HelpFormatter,
                                description="See, search, import, digest, recall and forget "
                                            "Varaverk's long-term memory.",
                                epilog=exitcodes.epilog())
    add_config_option(p)
    p.add_argument("-v", "--verbose", action="store_true", help="debug output")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    listing = sub.add_parser("list", help="conversations, or one conversation's triplets")
    listing.add_argument("--conversation", metavar="ID", help="list this conversation's "
                         "triplets (ids for show and forget)")
    sub.add_parser("search", help="turns holding words").add_argument(
        "words", nargs="+", help="words to find (any of them; best match first)")
    sub.add_parser("show", help="one triplet's turns, facts and recollection").add_argument(
        "triplet", type=int, help="a triplet id (from list --conversation or recall)")
    forget = sub.add_parser("forget", help="remove a triplet, a conversation or everything")
    which = forget.add_mutually_exclusive_group(required=True)
    which.add_argument("--triplet", type=int, metavar="ID")
    which.add_argument("--conversation", metavar="ID")
    which.add_argument("--all", action="store_true", help="everything (needs --yes)")
    forget.add_argument("--yes", action="store_true", help="confirm --all")
    sub.add_parser("export", help="everything as JSON").add_argument(
        "file", nargs="?", help="write here (mode 600) instead of standard output")
    sub.add_parser("import", help="past conversations from chat-export JSON").add_argument(
        "file", help="a JSON list of {chat, sender, timestamp, text, id?}")
    sub.add_parser("digest", help="digest pending triplets and retry failed model digests")
    sub.add_parser("redigest", help="drop every digest and digest all turns again")
    recall = sub.add_parser("recall", help="what a question would recall (no generation)")
    recall.add_argument("question", help="the question a new conversation would ask")
    recall.add_argument("--conversation", metavar="ID", help="the current conversation "
                        "(never recalled)")
    recall.add_argument("--json", action="store_true", help="triplets with turn ids, votes, "
                        "facts, recollections and the prompt block, as JSON")
    evaluate = sub.add_parser("eval", help="evidence recall@k on a dev set")
    evaluate.add_argument("devset", help="sessions and questions (tests/fixtures/"
                          "memory-dev.json shows the format); run in a temporary memory")
    evaluate.add_argument("--json", action="store_true", help="the figures and per-question "
                          "rankings as JSON")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run one ai-memory sub-command; returns the exit code."""
    return cli.run(PROGRAM, _main, argv)


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    settings = load_settings_or_report(PROGRAM, args.config)
    if settings is None:
        return exitcodes.CONFIG
    setup_logging(settings, PROGRAM, args.verbose, quiet=args.command in ("export", "recall"))
    if not settings.ai_enabled:
        print(f"{PROGRAM}: AI_ENABLED is false; nothing to do", file=sys.stderr)
        return exitcodes.OK
    if args.command in REMEMBERING and not settings.ai_memory_enabled:
        print(f"{PROGRAM}: AI_MEMORY_ENABLED is false; nothing is remembered or recalled",
              file=sys.stderr)
        return exitcodes.OK
    if args.command == "eval":
        return _eval(settings, args)
    from varaverk.memory.host_memory import HostMemory  # numpy and the store: on need
    if args.command not in WRITING:
        with HostMemory(settings) as memory:
            return COMMANDS[args.command](memory, args)
    from varaverk.locking import index_lock
    with index_lock(settings.memory_path, settings.ai_index_lock_timeout), \
            HostMemory(settings) as memory:
        return COMMANDS[args.command](memory, args)


def _list(memory, args) -> int:
    if args.conversation is None:
        for conversation, count, first, last in memory.store.conversations():
            print(f"{neutralise(conversation)}\t{count} turns\t{first} … {last}")
        return exitcodes.OK
    for row in memory.store.triplets(args.conversation):
        facts = memory.store.facts(row.id)
        print(f"{row.id}\tturns {row.first_seq}-{row.last_seq}\t{row.digest}"
              f"{' (retry)' if row.status == 'retry' else ''}\t{len(facts)} facts\t"
              f"{neutralise(memory.store.recollection(row.id))[:120]}")
    return exitcodes.OK


def _search(memory, args) -> int:
    for turn, score in memory.store.search_turns(" ".join(args.words)):
        print(f"{neutralise(turn.conversation)}\t{turn.turn_ref}\t{turn.said_at}\t"
              f"{turn.speaker}: {neutralise(turn.text)[:200]}")
    return exitcodes.OK


def _show(memory, args) -> int:
    row = memory.store.triplet(args.triplet)
    if row is None:
        raise UsageError(f"no triplet {args.triplet} (ai-memory list --conversation ID)")
    print(f"triplet {row.id} of {neutralise(row.conversation)}, turns {row.first_seq}-"
          f"{row.last_seq}, {row.digest} digest ({row.status})")
    for turn in memory.store.turns(row.conversation, row.first_seq, row.last_seq):
        print(f"  [{turn.turn_ref} {turn.said_at}] {turn.speaker}: {neutralise(turn.text)}")
    print("facts:")
    for fact in memory.store.facts(row.id):
        print(f"  - ({fact.type}, {fact.speaker}) {neutralise(fact.statement)}")
    print(f"recollection: {neutralise(memory.store.recollection(row.id))}")
    return exitcodes.OK


def _forget(memory, args) -> int:
    if args.all:
        if not args.yes:
            raise UsageError("forget --all removes everything remembered: add --yes")
        removed = memory.store.forget_all()
    elif args.conversation is not None:
        removed = memory.store.forget_conversation(args.conversation)
    else:
        removed = memory.store.forget_triplet(args.triplet)
        if not removed:
            raise UsageError(f"no triplet {args.triplet}")
    print(f"forgot {removed} turns")
    return exitcodes.OK


def _export(memory, args) -> int:
    text = json.dumps(memory.store.export(), ensure_ascii=False, indent=1) + "\n"
    if args.file:
        from varaverk.atomic_files import write_atomic
        write_atomic(args.file, text.encode("utf-8"), mode=0o600)
    else:
        sys.stdout.write(text)
    return exitcodes.OK


def _progress(done: int, total: int) -> None:
    if done == total or done % 50 == 0:
        print(f"{PROGRAM}: digested {done}/{total} triplets", file=sys.stderr)


def _import(memory, args) -> int:
    from varaverk.memory.chat_import import parse_chat_export
    try:
        chats = parse_chat_export(Path(args.file).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"cannot import {args.file}: {exc}") from None
    added = sum(len(memory.remember(chat, turns)) for chat, turns in chats.conversations.items())
    print(f"imported {added} turns of {len(chats.conversations)} conversations"
          f"{f' ({chats.skipped} messages skipped)' if chats.skipped else ''}")
    memory.digest_pending(_progress)
    return exitcodes.OK


def _digest(memory, args) -> int:
    print(f"digested {memory.digest_pending(_progress)} triplets")
    return exitcodes.OK


def _redigest(memory, args) -> int:
    dropped = memory.store.drop_digests()
    print(f"dropped {dropped} digests; digested {memory.digest_pending(_progress)} triplets")
    return exitcodes.OK


def _recall(memory, args) -> int:
    recalled = memory.recall(args.question, conversation=args.conversation)
    block, used = memory.block(recalled)
    if args.json:
        print(json.dumps({"question": args.question, "recalled": [r.as_dict() for r in recalled],
                          "in_prompt": [r.triplet_id for r in used], "block": block},
                         ensure_ascii=False, indent=1))
        return exitcodes.OK
    if not recalled:
        print("nothing recalled")
    for r in recalled:
        print(f"{'hot ' if r.hot else 'echo'} triplet {r.triplet_id} ({neutralise(r.conversation)}"
              f", {r.said_at[:10]}): {r.votes} votes, turns "
              f"{', '.join(t.turn_ref for t in r.turns)}")
    if block:
        print("\n" + neutralise(block))
    return exitcodes.OK


def _eval(settings, args) -> int:
    from varaverk.memory.evaluation import METHODS, evaluate, load_dev_set
    from varaverk.memory.host_memory import HostMemory
    try:
        dev = load_dev_set(args.devset)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"cannot read the dev set: {exc}") from None
    with tempfile.TemporaryDirectory(prefix="ai-memory-eval-") as tmp, \
            HostMemory(settings.replace(ai_data_dir=Path(tmp))) as memory:
        result = evaluate(memory, dev)
    if args.json:
        print(json.dumps(result, indent=1))
        return exitcodes.OK
    keys = sorted({k for m in METHODS for k in result["methods"].get(m, {})})
    print(f"{result['name']}: {result['questions']} questions, {result['triplets']} triplets")
    print(f"{'':28}" + "".join(f"{m:>10}" for m in METHODS))
    for key in keys:
        print(f"{key:28}" + "".join(f"{result['methods'][m].get(key, float('nan')):>10.3f}"
                                    for m in METHODS))
    return exitcodes.OK


COMMANDS = {"list": _list, "search": _search, "show": _show, "forget": _forget,
            "export": _export, "import": _import, "digest": _digest, "redigest": _redigest,
            "recall": _recall}


if __name__ == "__main__":
    sys.exit(main())
