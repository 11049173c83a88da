#!/usr/bin/env python3
# varaverk :: Tools/ai_chat_worker.py
# Answer one chat turn for a profile: retrieve, build the prompt, stream the model, record.
#
# PURPOSE
#   The one place where a question becomes a model answer. ai-query (the CLI) and the dock
#   both call run_turn here, so the prompt, the citations, the "not covered" rule, profile
#   escalation and the token ledger behave the same whichever way a question arrives. Run
#   directly, it reads one turn request as JSON on stdin and writes the turn's events as
#   NDJSON on stdout, for scripts and for debugging a profile.
#
# OPERATIONAL MODEL
#   Turn Flow
#     The profile is looked up in Plugin/profiles.py. A profile that retrieves (varaverk,
#     troubleshoot) and the chat profile (which may be handed to varaverk) rewrite a
#     follow-up into a standalone query, search the index, and judge the hits with the
#     retriever's relevance threshold. Then capability evidence is gathered for profiles
#     that hold more than retrieval, the sources are announced, the prompt is built by
#     varaverk.prompts and the model's answer is streamed as "thinking" and "content"
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
#     Evidence beyond retrieval comes only from varaverk_dock.capabilities, whose functions
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
#   AI_HOST_NAME
#     The host name written into ledger rows when the caller gives none.
#
# RUNTIME MODES
#   Library
#     run_turn(request, settings, retriever=..., chat_client=..., ledger_path=..., host=...)
#     yields TurnEvents; the CLI and the dock pass their own retriever and client.
#   --stdin (default when run directly)
#     Reads a TurnRequest as JSON on stdin ({"profile", "question", "history", "kind",
#     "section", "k", "source"}) and writes one JSON event per line on stdout. Exit 0 when
#     the turn ended with done, 69 when no model server was reachable, 66 without an index,
#     1 on any other error.
#   --config PATH, --token-db PATH --token-host NAME
#     Another conf file; append a ledger row for the completed turn (none without them).
"""Answer one chat turn for a profile and stream its events (see the header above)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

from varaverk import exitcodes
from varaverk.prompts import build_messages, context_budget, format_context
from varaverk.rewrite import looks_dependent, standalone_query
from varaverk.search import NOT_COVERED, citations
from varaverk.shell_scan import scan
from varaverk_dock.profiles import CODE_SCANNING, RETRIEVAL

log = logging.getLogger("varaverk.worker")

@dataclass
class TurnRequest:
    """One question for one profile.

    Attributes:
        profile: profile name (``varaverk``, ``chat``, ``code``, ``troubleshoot``).
        question: the user's question as written.
        history: earlier messages ``{"role": "user"|"assistant", "content"}``, oldest first.
        kind, section: hard retrieval filters (None: all).
        k: chunks to retrieve (None: ``AI_TOP_K``).
        log_path: a log file the troubleshoot profile may read (scoped-log capability).
        source: where the ask came from, for the ledger (``cli`` or ``webgui``).
    """

    profile: str
    question: str
    history: list[dict] = field(default_factory=list)
    kind: str | None = None
    section: str | None = None
    k: int | None = None
    log_path: str | None = None
    source: str = "cli"

    @classmethod
    def from_dict(cls, data: dict) -> "TurnRequest":
        """Build from JSON data; unknown keys are ignored, wrong types raise ValueError."""
        if not isinstance(data, dict):
            raise ValueError("a turn request is a JSON object")
        question = data.get("question")
        if not isinstance(question, str) or not question.strip():
            raise ValueError("question: a non-empty string is required")
        history = data.get("history")
        history = [] if history is None else history
        if not isinstance(history, list):
            raise ValueError("history: a list of {role, content} objects is required")
        k = data.get("k")
        if k is not None and (not isinstance(k, int) or k < 1):
            raise ValueError("k: a whole number ≥ 1 is required")
        return cls(profile=str(data.get("profile") or "varaverk"), question=question,
                   history=history, kind=data.get("kind"), section=data.get("section"), k=k,
                   log_path=data.get("log_path"), source=str(data.get("source") or "cli"))


@dataclass
class TurnEvent:
    """One event of a turn: ``type`` (see the header's Events) and its ``data``."""

    type: str
    data: dict = field(default_factory=dict)

    def to_json(self) -> str:
        """One NDJSON line (without the newline)."""
        return json.dumps({"type": self.type, "data": self.data}, ensure_ascii=False,
                          default=str)


def _gather(profile, request: TurnRequest, settings):
    """Capability evidence for profiles holding more than retrieval; None for the others."""
    if not (set(profile.capabilities) - {RETRIEVAL, CODE_SCANNING}):
        return None
    # Imported here: psutil and the log readers cost start-up time the other profiles skip.
    from varaverk_dock.capabilities import gather_context
    return gather_context(profile, request, settings)


def run_turn(request: TurnRequest, settings, *, retriever=None, chat_client=None,
             ledger_path: str | Path | None = None, host: str | None = None
             ) -> Iterator[TurnEvent]:
    """Answer one turn, yielding TurnEvents (the header lists them).

    Args:
        request: the question, profile, history and filters.
        settings: ``varaverk.config.Settings``.
        retriever: a ``varaverk.search.Retriever``; None opens one from settings when the
            profile needs it (a missing index ends a retrieval profile's turn with an error
            event {"message", "kind": "no_index"}; chat simply stays chat).
        chat_client: a ``varaverk.generation.ChatClient``; None makes one from settings, only
            when the model is actually needed.
        ledger_path: append one ledger row here on "done" (None: no row).
        host: the ledger row's host (default ``settings.ai_host_name``).

    Error events carry {"message", "kind"} with kind "unavailable" (no model server),
    "generation", "no_index", "mismatch", "profile" or "failure".
    """
    from varaverk_dock.profiles import RETRIEVAL, UnknownProfile, get_profile

    t0 = time.monotonic()
    timings: dict[str, float] = {}
    try:
        profile = get_profile(request.profile)
    except UnknownProfile as exc:
        yield TurnEvent("error", {"message": str(exc), "kind": "profile"})
        return
    original = profile
    wants_search = profile.retrieves or profile.escalates_to is not None
    hits: list = []
    confident = False
    query = request.question

    if wants_search and retriever is None:
        try:
            from varaverk.search import Retriever
            retriever = Retriever(settings)
        except Exception as exc:
            kind = {"IndexMissing": "no_index", "IndexMismatch": "mismatch"}.get(
                type(exc).__name__, "failure")
            if profile.retrieves:
                yield TurnEvent("error", {"message": str(exc), "kind": kind})
                return
            log.info("chat stays chat: no usable index (%s)", exc)
            retriever = None

    if wants_search and retriever is not None:
        try:
            rewrite_client = None
            if request.history and looks_dependent(request.question):
                rewrite_client = chat_client if chat_client is not None else _client(settings)
            query = standalone_query(request.question, request.history, rewrite_client)
            k = request.k or getattr(settings, "ai_top_k", 5) or 5
            hits = retriever.search(query, k, kind=request.kind, section=request.section)
            confident = retriever.confident(hits)
        except Exception as exc:
            yield TurnEvent("error", {"message": f"retrieval failed: {exc}", "kind": "failure"})
            return
        timings["retrieval_s"] = round(time.monotonic() - t0, 4)

    if profile.escalates_to and confident:
        profile = get_profile(profile.escalates_to)
        yield TurnEvent("profile", {"profile": profile.name, "from": original.name,
                                    "reason": "the documentation has confident matches "
                                              "for this question"})
    answers_from_docs = profile.retrieves
    sources = citations(hits) if answers_from_docs else []

    # A documentation-only profile with nothing relevant: say so, call no model.
    only_docs = answers_from_docs and not (set(profile.capabilities) - {RETRIEVAL})
    if only_docs and not confident:
        yield TurnEvent("sources", {"sources": sources, "query": query, "confident": False,
                                    "results": [h.as_dict() for h in hits]})
        timings["total_s"] = round(time.monotonic() - t0, 4)
        yield TurnEvent("done", {
            "answer": NOT_COVERED, "reasoning": "", "sources": sources,
            "prompt_tokens": None, "completion_tokens": None, "tok_s": None,
            "timings": timings, "profile": profile.name, "not_covered": True,
            "query": query, "truncated": False,
        })
        return

    evidence: list[str] = []
    try:
        gathered = _gather(profile, request, settings)
    except Exception as exc:
        yield TurnEvent("error", {"message": f"capability failed: {exc}", "kind": "failure"})
        return
    if gathered is not None:
        evidence = [b for b in getattr(gathered, "blocks", []) if b]
        for used in getattr(gathered, "used", []) or []:
            used = used if isinstance(used, dict) else {"summary": str(used)}
            yield TurnEvent("capability", {
                "name": used.get("name") or used.get("capability") or "capability",
                "summary": used.get("summary") or json.dumps(used, default=str)[:300]})
        if answers_from_docs and retriever is not None and getattr(gathered, "queries", None):
            seen = {h.chunk.id for h in hits}
            for extra in gathered.queries:
                for h in retriever.search(extra, 2, kind=request.kind, section=request.section):
                    if h.chunk.id not in seen:
                        seen.add(h.chunk.id)
                        hits.append(h)
            sources = citations(hits)

    if answers_from_docs:
        yield TurnEvent("sources", {"sources": sources, "query": query, "confident": confident,
                                    "results": [h.as_dict() for h in hits]})
    budget = context_budget(settings)
    context = ""
    if answers_from_docs and hits:
        groups = retriever.expand(hits, budget) if retriever is not None else [
            [h.chunk] for h in hits]
        context, _ = format_context(groups, budget)
    messages = build_messages(profile.system_prompt(), request.question,
                              history=request.history, history_turns=profile.history_turns,
                              context=context, evidence=evidence,
                              answers_from_documents=answers_from_docs)

    from varaverk.generation import GenerationError, GenerationUnavailable
    completion = None
    t_gen = time.monotonic()
    try:
        client = chat_client if chat_client is not None else _client(settings)
        if client is None:
            raise GenerationUnavailable("no generation model is configured")
        for event in client.stream(messages):
            if event.type == "thinking":
                yield TurnEvent("thinking", {"text": event.text,
                                             "reclassified": bool(event.reclassified)})
            elif event.type == "content":
                yield TurnEvent("content", {"text": event.text})
            elif event.type == "done":
                completion = event.completion
    except GenerationUnavailable as exc:
        yield TurnEvent("error", {"message": str(exc), "kind": "unavailable"})
        return
    except GenerationError as exc:
        yield TurnEvent("error", {"message": str(exc), "kind": "generation"})
        return
    except Exception as exc:  # anything else still ends the turn with one error event
        log.exception("generation failed")
        yield TurnEvent("error", {"message": f"generation failed: {exc}", "kind": "failure"})
        return
    if completion is None:
        yield TurnEvent("error", {"message": "the model stream ended without a result",
                                  "kind": "generation"})
        return
    timings["generation_s"] = round(time.monotonic() - t_gen, 4)
    if completion.first_token_s is not None:
        timings["first_token_s"] = round(completion.first_token_s, 4)

    if profile.holds(CODE_SCANNING):
        # The whole answer: the scanner finds its fenced and indented shell itself and
        # reports the answer's own line numbers.
        findings = [asdict(f) for f in scan(completion.answer, markdown=True)]
        yield TurnEvent("findings", {"findings": findings})

    if ledger_path:
        try:
            from varaverk.ledger import append_row, row_from_completion
            row = row_from_completion(completion, host or settings.ai_host_name,
                                      profile.name, request.source)
            # The dock prunes its ledger; the CLI never does (a shell user's file is theirs).
            retain = None if request.source == "cli" else settings.ai_token_retain_rows
            append_row(ledger_path, row, retain_rows=retain)
        except Exception as exc:
            log.warning("ledger row not written to %s: %s", ledger_path, exc)
    timings["total_s"] = round(time.monotonic() - t0, 4)
    yield TurnEvent("done", {
        "answer": completion.answer, "reasoning": completion.thinking, "sources": sources,
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens, "tok_s": completion.tok_s,
        "timings": timings, "profile": profile.name, "not_covered": False, "query": query,
        "truncated": completion.truncated,
    })


def _client(settings):
    """The configured chat client, or None when none can be made (no model configured)."""
    from varaverk.config import ConfigError
    from varaverk.generation import make_chat_client
    try:
        return make_chat_client(settings)
    except ConfigError as exc:
        log.warning("no generation client: %s", exc)
        return None


_EXIT_FOR_ERROR = {"unavailable": exitcodes.UNAVAILABLE, "no_index": exitcodes.NO_INDEX,
                   "mismatch": exitcodes.MISMATCH}


def main(argv: list[str] | None = None) -> int:
    """Read a TurnRequest as JSON on stdin, write its TurnEvents as NDJSON on stdout."""
    from varaverk.config import load_settings_or_report

    parser = argparse.ArgumentParser(
        prog="ai-chat-worker",
        description="Answer one chat turn: a TurnRequest JSON on stdin, NDJSON events on stdout.")
    parser.add_argument("--config", help="conf file (default: Configurations/master.conf)")
    parser.add_argument("--token-db", help="append a ledger row for the completed turn here")
    parser.add_argument("--token-host", help="host name for the ledger row")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = load_settings_or_report("ai-chat-worker", args.config)
    if settings is None:
        return exitcodes.CONFIG
    if not settings.ai_enabled:
        print("ai-chat-worker: AI_ENABLED is false; nothing to do", file=sys.stderr)
        return exitcodes.OK
    try:
        request = TurnRequest.from_dict(json.loads(sys.stdin.read()))
    except (ValueError, json.JSONDecodeError) as exc:
        print(f"ai-chat-worker: bad turn request: {exc}", file=sys.stderr)
        return exitcodes.USAGE
    code = exitcodes.FAILURE
    for event in run_turn(request, settings, ledger_path=args.token_db, host=args.token_host):
        sys.stdout.write(event.to_json() + "\n")
        sys.stdout.flush()
        if event.type == "done":
            code = exitcodes.OK
        elif event.type == "error":
            code = _EXIT_FOR_ERROR.get(event.data.get("kind"), exitcodes.FAILURE)
    return code


if __name__ == "__main__":
    sys.exit(main())
