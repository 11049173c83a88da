"""The answer pipeline: one chat turn for one profile, as a stream of events.

The one place where a question becomes a model answer. ``ai-query`` and the dock both call
``run_turn``, so the prompt, the citations, the "not covered" rule, profile escalation and the
token ledger behave the same whichever way a question arrives. A turn runs named steps:

    retrieve   rewrite a follow-up into a standalone query, search, judge confidence
    escalate   hand a chat turn to its escalation profile when the index is confident
    recall     long-term memory for profiles holding ``memory`` (``answering.remembering``)
    evidence   capability evidence for profiles holding more than retrieval (log, health, ...)
    generate   build the prompt (``varaverk.answering.prompts``) and stream the model
    scan       the code profile's drafted shell, scanned for destructive operations
    record     one ledger row for the completed answer

Events (``TurnEvent.type``): ``profile`` (escalation), ``memory`` (what was recalled),
``sources``, ``capability``, ``thinking``, ``content``, ``findings`` (code profile), then
exactly one ``done`` or one ``error``; nothing follows an error, so a half answer is never
recorded as a completed ask.
A documentation-only profile with nothing relevant answers ``NOT_COVERED`` with the nearest
sources and never calls the model.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

from varaverk.answering.generation.events import GenerationUnavailable
from varaverk.answering.profiles import (CODE_SCANNING, MEMORY, RETRIEVAL, Profile,
                                         UnknownProfile, get_profile)
from varaverk.answering.prompts import build_messages, context_budget
from varaverk.answering.remembering import Remembered, recall_for_turn
from varaverk.answering.rewrite import looks_dependent, standalone_query
from varaverk.answering.query_focused_summary import (fallback_summaries, matched_chunks,
                                                       summarise_for_question)
from varaverk.answering.summary_context import later_documents, question_section, summary_block
from varaverk.config import ConfigError
from varaverk.errors import VaraverkError, exit_code_for_kind
from varaverk.ledger.recording import RecordingChatClient, TokenTally, recorder
from varaverk.named_sources import names_of_types
from varaverk.retrieval.context import format_context
from varaverk.retrieval.hits import citations
from varaverk.retrieval.relevance import NOT_COVERED
from varaverk.retrieval.search import Retriever

log = logging.getLogger("varaverk.answering.answer")


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
        source_name: retrieve only from this named source (``repo``, ``vault``); None: the
            profile's own source types.
        conversation: the conversation this turn belongs to (the dock's chat id): memory
            never recalls it into itself; None: a one-off question.
    """

    profile: str
    question: str
    history: list[dict] = field(default_factory=list)
    kind: str | None = None
    section: str | None = None
    k: int | None = None
    log_path: str | None = None
    source: str = "cli"
    source_name: str | None = None
    conversation: str | None = None

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
                   log_path=data.get("log_path"), source=str(data.get("source") or "cli"),
                   source_name=data.get("source_name") or None,
                   conversation=str(data["conversation"]) if data.get("conversation") else None)


@dataclass
class TurnEvent:
    """One event of a turn: ``type`` (see the module docstring) and its ``data``."""

    type: str
    data: dict = field(default_factory=dict)

    def to_json(self) -> str:
        """One NDJSON line (without the newline)."""
        return json.dumps({"type": self.type, "data": self.data}, ensure_ascii=False,
                          default=str)


class TurnFailed(VaraverkError):
    """Ends a turn with one error event ``{"message", "kind"}``.

    ``kind`` is the failing error's own (``VaraverkError.kind``: "no_index", "mismatch",
    "unavailable", "generation", "profile", ...) or "failure" for anything unexpected, and
    ``exit_code`` follows from it, so ai-query, the chat worker and the dock agree.
    """

    def __init__(self, message: str, kind: str = "failure"):
        super().__init__(message)
        self.message, self.kind = message, kind
        self.exit_code = exit_code_for_kind(kind)

    @classmethod
    def of(cls, exc: BaseException, context: str = "") -> "TurnFailed":
        """A TurnFailed for ``exc``: a VaraverkError keeps its kind, anything else is a
        "failure"; ``context`` ("retrieval failed") prefixes the message."""
        kind = exc.kind if isinstance(exc, VaraverkError) else "failure"
        message = exc.one_line() if isinstance(exc, VaraverkError) else str(exc)
        return cls(f"{context}: {message}" if context else message, kind)

    def event(self) -> TurnEvent:
        """The turn's closing error event."""
        return TurnEvent("error", {"message": self.message, "kind": self.kind})


@dataclass
class _Turn:
    """What one turn has learnt so far, handed from step to step."""

    request: TurnRequest
    settings: Any
    profile: Profile
    retriever: Any
    chat_client: Any
    query: str
    t0: float = field(default_factory=time.monotonic)
    timings: dict[str, float] = field(default_factory=dict)
    hits: list = field(default_factory=list)
    confident: bool = False
    evidence: list[str] = field(default_factory=list)
    memory: Remembered = field(default_factory=Remembered)
    work: TokenTally = field(default_factory=TokenTally)  # model turns made for the answer

    @property
    def answers_from_docs(self) -> bool:
        return self.profile.retrieves

    @property
    def sources(self) -> list[dict]:
        return citations(self.hits) if self.answers_from_docs else []

    def elapsed(self, since: float | None = None) -> float:
        return round(time.monotonic() - (self.t0 if since is None else since), 4)

    def sources_event(self) -> TurnEvent:
        return TurnEvent("sources", {"sources": self.sources, "query": self.query,
                                     "confident": self.confident,
                                     "results": [h.as_dict() for h in self.hits]})

    @property
    def index_head(self) -> str | None:
        """The HEAD commit the searched index was built at (None: no search, or unknown)."""
        if not self.answers_from_docs or self.retriever is None:
            return None
        return self.retriever.index.meta().get("head") or None

    def done_event(self, **data) -> TurnEvent:
        self.timings["total_s"] = self.elapsed()
        return TurnEvent("done", {"sources": self.sources, "index_head": self.index_head,
                                  "timings": self.timings, "profile": self.profile.name,
                                  "query": self.query, "memory": self.memory.recalled, **data})


def run_turn(request: TurnRequest, settings, *, retriever=None, chat_client=None,
             ledger_path: str | Path | None = None, host: str | None = None
             ) -> Iterator[TurnEvent]:
    """Answer one turn, yielding TurnEvents (the module docstring lists them).

    Args:
        request: the question, profile, history and filters.
        settings: ``varaverk.config.Settings``.
        retriever: a ``varaverk.retrieval.search.Retriever``; None opens one from settings when the
            profile needs it (a missing index ends a retrieval profile's turn with an error
            event {"message", "kind": "no_index"}; chat simply stays chat).
        chat_client: a ``varaverk.answering.generation.streaming.ChatClient``; None makes one
            from settings, only when the model is actually needed.
        ledger_path: append one ledger row here on "done" (None: no row).
        host: the ledger row's host (default ``settings.ai_host_name``).

    Error events carry {"message", "kind"}: the failing error's ``VaraverkError.kind``
    ("unavailable": no model server, "generation", "no_index", "corrupt", "mismatch",
    "profile", ...) or "failure" for anything unexpected; ``errors.exit_code_for_kind`` maps
    a kind to its exit code.
    """
    try:
        turn = _start(request, settings, retriever, chat_client)
        _retrieve(turn)
        yield from _escalate(turn)
        if _not_covered(turn):
            yield turn.sources_event()
            yield turn.done_event(answer=NOT_COVERED, reasoning="", prompt_tokens=None,
                                  completion_tokens=None, tok_s=None, not_covered=True,
                                  truncated=False, prompt_cut=False)
            return
        yield from _recall(turn)
        yield from _evidence(turn)
        if turn.answers_from_docs:
            yield turn.sources_event()
        completion = yield from _generate(turn)
        yield from _scan(turn, completion)
    except TurnFailed as exc:
        yield exc.event()
        return
    _record(turn, completion, ledger_path, host)
    yield turn.done_event(
        answer=completion.answer, reasoning=completion.thinking,
        prompt_tokens=completion.prompt_tokens, completion_tokens=completion.completion_tokens,
        tok_s=completion.tok_s, not_covered=False, truncated=completion.truncated,
        prompt_cut=completion.prompt_cut)


def _start(request: TurnRequest, settings, retriever, chat_client) -> _Turn:
    """The turn's profile and, when it may search, its retriever. Raises TurnFailed."""
    try:
        profile = get_profile(request.profile)
    except UnknownProfile as exc:
        raise TurnFailed.of(exc) from None
    if _wants_search(profile) and retriever is None:
        retriever = _open_retriever(profile, settings)
    return _Turn(request=request, settings=settings, profile=profile, retriever=retriever,
                 chat_client=chat_client, query=request.question)


def _wants_search(profile: Profile) -> bool:
    # chat never answers from the index, but searches to decide whether to escalate.
    return profile.retrieves or profile.escalates_to is not None


def _open_retriever(profile: Profile, settings):
    """A Retriever from settings; None for a profile that can do without one."""
    try:
        return Retriever(settings)
    except Exception as exc:
        if profile.retrieves:
            raise TurnFailed.of(exc) from exc
        log.info("%s stays %s: no usable index (%s)", profile.name, profile.name, exc)
        return None


def _retrieve(turn: _Turn) -> None:
    """Step retrieve: standalone query, hits and confidence (no-op without a retriever)."""
    if not _wants_search(turn.profile) or turn.retriever is None:
        return
    request = turn.request
    try:
        rewrite_client = None
        if request.history and looks_dependent(request.question):
            rewrite_client = _work_client(turn)
        turn.query = standalone_query(request.question, request.history, rewrite_client)
        k = request.k or getattr(turn.settings, "ai_top_k", 5) or 5
        turn.hits = turn.retriever.search(turn.query, k, kind=request.kind,
                                          section=request.section, sources=_scope(turn))
        turn.confident = turn.retriever.confident(turn.hits)
    except Exception as exc:
        raise TurnFailed.of(exc, "retrieval failed") from exc
    turn.timings["retrieval_s"] = turn.elapsed()


def _scope(turn: _Turn) -> tuple[str, ...]:
    """The source names a turn searches: the one the request names, else those of the
    profile's source types."""
    if turn.request.source_name:
        return (turn.request.source_name,)
    return names_of_types(turn.settings, turn.profile.source_types)


def _escalation_target(turn: _Turn) -> str | None:
    """``chat``'s escalation: ``notes`` when the best match is in the operator's notes or
    chats, else ``varaverk``; the hits are then kept to the new profile's sources."""
    original = turn.profile
    target = original.escalates_to
    if original.notes_escalation and turn.hits:
        notes = names_of_types(turn.settings, get_profile(original.notes_escalation).source_types)
        if getattr(turn.hits[0].chunk, "source", "repo") in notes:
            target = original.notes_escalation
    if target and not turn.request.source_name:
        allowed = set(names_of_types(turn.settings, get_profile(target).source_types))
        turn.hits = [h for h in turn.hits if getattr(h.chunk, "source", "repo") in allowed]
    return target


def _escalate(turn: _Turn) -> Iterator[TurnEvent]:
    """Step escalate: a confident chat turn is answered by its escalation profile."""
    original = turn.profile
    if original.escalates_to and turn.confident and turn.retriever.escalates(turn.hits):
        turn.profile = get_profile(_escalation_target(turn))
        yield TurnEvent("profile", {"profile": turn.profile.name, "from": original.name,
                                    "reason": "the documentation has confident matches "
                                              "for this question"})


def _not_covered(turn: _Turn) -> bool:
    """A documentation-only profile with nothing relevant: answer without the model."""
    only_docs = turn.answers_from_docs and \
        not (set(turn.profile.capabilities) - {RETRIEVAL, MEMORY})
    return only_docs and not turn.confident


def _recall(turn: _Turn) -> Iterator[TurnEvent]:
    """Step recall: what the operator said in earlier conversations, as a quoted block."""
    embedder = getattr(turn.retriever, "embedder", None)
    turn.memory = recall_for_turn(turn.profile, turn.request, turn.settings, embedder)
    if turn.memory.recalled:
        yield TurnEvent("memory", {"recalled": turn.memory.recalled})


def _evidence(turn: _Turn) -> Iterator[TurnEvent]:
    """Step evidence: capability blocks and extra retrieval queries for the prompt."""
    profile = turn.profile
    if not (set(profile.capabilities) - {RETRIEVAL, CODE_SCANNING, MEMORY}):
        return
    # Imported here: psutil and the log readers cost start-up time the other profiles skip.
    from varaverk.answering.capabilities import gather_context
    try:
        gathered = gather_context(profile, turn.request, turn.settings)
    except Exception as exc:
        raise TurnFailed(f"capability failed: {exc}") from exc
    turn.evidence = [b for b in gathered.blocks if b]
    for used in gathered.used or []:
        used = used if isinstance(used, dict) else {"summary": str(used)}
        yield TurnEvent("capability", {
            "name": used.get("name") or used.get("capability") or "capability",
            "summary": used.get("summary") or json.dumps(used, default=str)[:300]})
    if turn.answers_from_docs and turn.retriever is not None and gathered.queries:
        _add_hits(turn, gathered.queries)


def _add_hits(turn: _Turn, queries: list[str], per_query: int = 2) -> None:
    """Extend the hits with the best few results of each extra query, without repeats."""
    seen = {h.chunk.id for h in turn.hits}
    for extra in queries:
        for hit in turn.retriever.search(extra, per_query, kind=turn.request.kind,
                                         section=turn.request.section, sources=_scope(turn)):
            if hit.chunk.id not in seen:
                seen.add(hit.chunk.id)
                turn.hits.append(hit)


def _messages(turn: _Turn) -> list[dict]:
    """The prompt: system prompt, history, labelled context and evidence, the question."""
    budget = context_budget(turn.settings)
    context = summaries = ""
    if turn.answers_from_docs and turn.hits:
        if turn.retriever is not None:
            groups, summaries = _packed(turn, budget)
        else:
            groups = [[h.chunk] for h in turn.hits]
        context, _ = format_context(groups, budget - len(summaries))
    return build_messages(turn.profile.system_prompt(), turn.request.question,
                          history=turn.request.history,
                          history_turns=turn.profile.history_turns, context=context,
                          evidence=[turn.memory.block, *turn.evidence],
                          answers_from_documents=turn.answers_from_docs, summaries=summaries)


def _packed(turn: _Turn, budget: int) -> tuple[list, str]:
    """``(context groups, summaries section)``. With AI_SUMMARIES on, when the results do
    not all fit the context: the documents after the first AI_SUMMARY_VERBATIM_DOCS that
    have a current summary go as it (at most half the budget), the rest as excerpts
    (``summary_context``); with AI_SUMMARIES=query, the first of them as summaries made for
    the question (``_question_summaries``)."""
    groups = turn.retriever.expand(turn.hits, budget)
    if turn.settings.ai_summaries == "off" or \
            {c.id for c in format_context(groups, budget)[1]} >= {h.chunk.id for h in turn.hits}:
        return groups, ""  # every result fits verbatim
    hit_paths = [h.chunk.path for h in turn.hits]
    later = later_documents(hit_paths, turn.settings.ai_summary_verbatim_docs)
    if turn.settings.ai_summaries == "query" and later:
        summaries, included = _question_summaries(turn, later, budget // 2)
    else:
        stored = turn.retriever.index.current_summaries(later) if later else {}
        summaries, included = summary_block(later, {p: s.text for p, s in stored.items()},
                                            budget // 2)
    if not included:
        return groups, ""
    verbatim = [h for h in turn.hits if h.chunk.path not in set(included)]
    return turn.retriever.expand(verbatim, budget - len(summaries) - 2), summaries


def _question_summaries(turn: _Turn, later: list[str], budget: int) -> tuple[str, list[str]]:
    """The summaries section for AI_SUMMARIES=query: the first AI_QUERY_SUMMARY_DOCS of
    ``later`` summarised for the (standalone) question from their matched chunks, the rest
    and every failure as their stored or extractive summaries (``query_focused_summary``)."""
    settings = turn.settings

    def client_for(seconds: float):
        from varaverk.answering.generation.chat_client import make_chat_client
        timeout = min(seconds, settings.ai_http_timeout)
        return RecordingChatClient(make_chat_client(settings.replace(ai_http_timeout=timeout)),
                                   turn.work.add)

    made = summarise_for_question(
        turn.query, [(p, matched_chunks(turn.hits, p)) for p in later], client_for,
        max_docs=settings.ai_query_summary_docs, seconds=settings.ai_query_summary_seconds)
    turn.timings["question_summaries_s"] = made.seconds
    others = [p for p in later if p not in made.texts]
    return question_section(later, made.texts, fallback_summaries(turn.retriever.index, others),
                            budget)


def _generate(turn: _Turn):
    """Step generate: stream the model's answer; returns its Completion. Raises TurnFailed."""
    messages = _messages(turn)
    completion = None
    t_gen = time.monotonic()
    try:
        client = _chat_client(turn)
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
    except VaraverkError as exc:
        raise TurnFailed.of(exc) from exc
    except Exception as exc:  # anything else still ends the turn with one error event
        log.exception("generation failed")
        raise TurnFailed(f"generation failed: {exc}") from exc
    if completion is None:
        raise TurnFailed("the model stream ended without a result", "generation")
    turn.timings["generation_s"] = turn.elapsed(t_gen)
    if completion.first_token_s is not None:
        turn.timings["first_token_s"] = round(completion.first_token_s, 4)
    return completion


def _scan(turn: _Turn, completion) -> Iterator[TurnEvent]:
    """Step scan: the code profile's answer, scanned whole (fenced and indented shell)."""
    if turn.profile.holds(CODE_SCANNING):
        from varaverk.answering.shell_scan import scan  # bashlex: only the code profile scans
        findings = [asdict(f) for f in scan(completion.answer, markdown=True)]
        yield TurnEvent("findings", {"findings": findings})


def _record(turn: _Turn, completion, ledger_path, host: str | None) -> None:
    """Step record: one ledger row for the whole ask (the answer's turn and those made for it:
    rewrite, question summaries); a row that cannot be written is a warning, not a loss."""
    if not ledger_path:
        return
    settings, request = turn.settings, turn.request
    # The dock prunes its ledger; the CLI never does (a shell user's file is theirs).
    retain = None if request.source == "cli" else settings.ai_token_retain_rows
    record = recorder(ledger_path, host or settings.ai_host_name, turn.profile.name,
                      request.source, retain_rows=retain)
    record(turn.work.with_work(completion))


def _work_client(turn: _Turn):
    """The turn's chat client for a model turn made on the way to the answer (the follow-up
    rewrite): its tokens count in the answer's ledger row. None when no client can be made."""
    client = _chat_client(turn)
    return None if client is None else RecordingChatClient(client, turn.work.add)


def _chat_client(turn: _Turn):
    """The turn's chat client, made from settings on first need; None when none can be."""
    if turn.chat_client is None:
        # httpx is imported only when a turn needs the model (see README, start-up path).
        from varaverk.answering.generation.chat_client import make_chat_client
        try:
            turn.chat_client = make_chat_client(turn.settings)
        except ConfigError as exc:
            log.warning("no generation client: %s", exc)
    return turn.chat_client
