#!/usr/bin/env python3
# varaverk :: Tools/varaverk_tools/ai_chat_worker.py
# Answer one chat turn for a profile: retrieve, build the prompt, stream the model, record.
#
# PURPOSE
#   Runs one chat turn from a script: reads one turn request as JSON on stdin and writes the
#   turn's events as NDJSON on stdout, for scripts and for debugging a profile. The turn
#   itself is varaverk.answering.answer.run_turn, the same pipeline ai-query (the CLI) and the dock
#   call, so the prompt, the citations, the "not covered" rule, profile escalation and the
#   token ledger behave the same whichever way a question arrives.
#
# OPERATIONAL MODEL
#   Turn Flow
#     The profile is looked up in AI/varaverk/answering/profiles.py. A profile that retrieves (varaverk,
#     troubleshoot) and the chat profile (which may be handed to varaverk) rewrite a
#     follow-up into a standalone query, search the index, and judge the hits with the
#     retriever's relevance threshold. Then capability evidence is gathered for profiles
#     that hold more than retrieval, the sources are announced, the prompt is built by
#     varaverk.answering.prompts and the model's answer is streamed as "thinking" and "content"
#     events, ending with exactly one "done" event or one "error" event.
#   Events
#     profile (escalation), sources, capability, thinking, content, findings (code
#     profile), done, error. The sources event carries the citations, the search query, whether
#     retrieval was confident and the verbatim results. The done event carries answer, reasoning, sources, token
#     counts, tok_s, timings, the profile that answered and whether it was "not covered".
#   Escalation
#     A chat turn whose question the index answers with confidence is handed to the
#     varaverk profile for that turn (event "profile" with the reason); the next turn
#     starts as chat again, so a general question never carries documentation along.
#
# DESIGN PRINCIPLES
#   One Prompt Builder
#     The CLI and the dock never assemble prompts themselves; a second copy would drift and
#     one of them would stop citing or start answering beyond the documents.
#   Not Covered Costs Nothing
#     When nothing retrieved clears the relevance threshold, a documentation-only profile
#     answers "the documentation does not cover this" with the nearest sources and never
#     calls the model: no tokens, no invented answer.
#   Events Over Callbacks
#     run_turn is a generator of plain events, so the CLI prints them, the dock turns them
#     into server-sent events and tests read them as a list.
#
# OPERATIONAL SAFEGUARDS
#   No Done After An Error
#     A failure before or during the stream ends the turn with one "error" event and
#     nothing after it: no "done", no ledger row, so a half answer is never recorded as a
#     completed ask.
#   Capability Gate
#     Evidence beyond retrieval comes only from varaverk.answering.capabilities, whose functions
#     call Profile.require first; a profile that does not hold a capability cannot reach it
#     whatever the question says.
#   Drafted Shell Is Scanned
#     For the code profile every fenced shell block of the answer is scanned for destructive
#     commands and the findings are sent with the answer.
#   Ledger Failure Does Not Lose The Answer
#     A ledger row that cannot be written is logged as a warning; the answer still arrives.
#
# CONFIGURATION
#   AI_GEN_BACKEND, AI_GEN_MODEL, AI_OLLAMA_HOSTS, AI_OPENAI_BASE_URL, AI_GEN_NUM_CTX
#     Which model server answers and how big its context window is; half the window (at
#     about four characters a token, at most 16,000 characters) holds documentation.
#   AI_TOP_K
#     How many chunks are retrieved per question when the request does not say.
#   AI_MIN_SCORE
#     The relevance threshold (best cosine similarity); 0 uses the calibrated default.
#   AI_MIN_MARGIN
#     The coverage rule's margin over the 50th best match, after the cost of question words
#     the best results miss; 0 uses the calibrated default.
#   AI_HOST_NAME
#     The host name written into ledger rows when the caller gives none.
#
# RUNTIME MODES
#   Library
#     run_turn(request, settings, retriever=..., chat_client=..., ledger_path=..., host=...)
#     yields TurnEvents; the CLI and the dock pass their own retriever and client.
#   --stdin (default when run directly)
#     Reads a TurnRequest as JSON on stdin ({"profile", "question", "history", "kind",
#     "section", "k", "source", "conversation"}; memory never recalls the conversation into
#     itself) and writes one JSON event per line on stdout. Exit 0 when
#     the turn ended with done, 69 when no model server was reachable, 66 without an index,
#     1 on any other error.
#   --config PATH, --token-db PATH --token-host NAME
#     Another conf file; append a ledger row for the completed turn (none without them).
"""Run one chat turn from stdin to stdout as NDJSON (see the header above)."""

from __future__ import annotations

import argparse
import json
import logging
import sys

from varaverk import cli
from varaverk import exitcodes
from varaverk.answering.answer import TurnRequest, run_turn
from varaverk.cli import HelpFormatter
from varaverk.config import add_config_option, load_settings
from varaverk.errors import UsageError, exit_code_for_kind


def main(argv: list[str] | None = None) -> int:
    """Read a TurnRequest as JSON on stdin, write its TurnEvents as NDJSON on stdout."""
    return cli.run("ai-chat-worker", _main, argv)


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(
        prog="ai-chat-worker",
        description="Answer one chat turn: a TurnRequest JSON on stdin, NDJSON events on stdout.",
        formatter_class=HelpFormatter,
        epilog=exitcodes.epilog())
    add_config_option(parser)
    parser.add_argument("--token-db", help="append a ledger row for the completed turn here")
    parser.add_argument("--token-host", help="host name for the ledger row")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = load_settings(args.config)
    if not settings.ai_enabled:
        print("ai-chat-worker: AI_ENABLED is false; nothing to do", file=sys.stderr)
        return exitcodes.OK
    try:
        request = TurnRequest.from_dict(json.loads(sys.stdin.read()))
    except (ValueError, json.JSONDecodeError) as exc:
        raise UsageError(f"bad turn request: {exc}") from None
    code = exitcodes.FAILURE
    for event in run_turn(request, settings, ledger_path=args.token_db, host=args.token_host):
        sys.stdout.write(event.to_json() + "\n")
        sys.stdout.flush()
        if event.type == "done":
            code = exitcodes.OK
        elif event.type == "error":
            code = exit_code_for_kind(event.data.get("kind"))
    return code


if __name__ == "__main__":
    sys.exit(main())
