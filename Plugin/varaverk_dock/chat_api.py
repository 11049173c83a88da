"""The chat API: profiles, one turn streamed as NDJSON, and the stored conversations.

    GET    /api/profiles         the profiles: name, label, turns, retrieves, capabilities
    POST   /api/ask              {"question", "profile"?, "chat_id"?, "log_path"?} → NDJSON stream
                                 of turn events, one JSON object a line: {"type", "data"}
    GET    /api/chats            {"chats": [summary...], "problems": [...], "kept": N} newest
                                 first; N is AI_CHAT_HISTORY_MAX (older chats are pruned)
    POST   /api/chats            {"messages": [...]} → a new chat (an import), every message checked
    GET    /api/chats/<id>       {"chat": summary, "messages": [{"role","content","html"}]};
                                 an answer also has "sources", "index_head" and "record"
    DELETE /api/chats/<id>       204; ``?forget_memory=1`` also forgets what long-term memory
                                 kept of it (``memory_api``)

The dock does not retrieve, prompt or generate itself: ``/api/ask`` runs the answer pipeline
(``varaverk.answering.answer.run_turn``), which does all of that and appends the ledger row (source
``webgui``) when a turn completes. This adds what a browser needs: the stream as NDJSON, the
final answer re-rendered as sanitised HTML, and the conversation saved once the turn is done
(never after an error, so a partial reply is never stored as a finished answer).

Stream event types are the pipeline's (``profile``, ``sources``, ``capability``, ``thinking``,
``content``, ``findings``, ``done``, ``error``) plus the dock's own ``start`` (the profile and
chat the turn runs in) and ``saved`` (``{"chat_id", "title"}``, after the chat file was
written). ``done`` additionally carries ``html``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Iterator

from flask import Blueprint, Response, jsonify, request, stream_with_context

from varaverk.answering.answer import TurnEvent, TurnFailed, TurnRequest, run_turn
from varaverk.answering.profiles import (DEFAULT_PROFILE, PROFILES, SCOPED_LOG, Profile,
                                         UnknownProfile, get_profile)
from varaverk_dock import memory_api, security
from varaverk_dock.conversations import (ChatNotFound, CorruptChat, InvalidMessage,
                                         validate_message)
from varaverk_dock.errors import api_error, json_object
from varaverk_dock.render import render_markdown
from varaverk_dock.state import DockState, dock_state
from varaverk_dock.turn_record import record_of_turn

log = logging.getLogger("varaverk.dock")

ASK_FIELDS = frozenset({"question", "profile", "chat_id", "log_path"})
# /api/turns also takes replace_last (regenerate, edit and resend).
TURN_FIELDS = ASK_FIELDS | {"replace_last"}

bp = Blueprint("chat", __name__)


def _ndjson(event_type: str, data: dict) -> str:
    return json.dumps({"type": event_type, "data": data}, ensure_ascii=False,
                      default=str) + "\n"


@bp.get("/api/profiles")
def profiles():
    """``GET /api/profiles``: the default profile and every profile's name, label, history
    turns, retrieval, capabilities (sorted) and escalation target."""
    return jsonify({"default": DEFAULT_PROFILE, "profiles": [
        {"name": p.name, "label": p.label, "history_turns": p.history_turns,
         "retrieves": p.retrieves, "capabilities": sorted(p.capabilities),
         "escalates_to": p.escalates_to} for p in PROFILES.values()]})


@dataclass
class AskRequest:
    """A checked ask: the question, its profile, the chat it continues and that chat's
    history (role and content only), the troubleshoot log to read, and ``replace_last``
    (regenerate or edit: the chat's last question and answer are left out of the history and
    replaced when the turn is saved)."""

    question: str
    profile: Profile
    chat_id: str | None
    history: list[dict[str, str]]
    log_path: str | None = None
    replace_last: bool = False
    asked_at: str = field(default_factory=memory_api.asked_now)

    def turn_request(self) -> TurnRequest:
        return TurnRequest(profile=self.profile.name, question=self.question,
                           history=self.history, log_path=self.log_path, source="webgui",
                           conversation=self.chat_id)


def checked_ask(body: dict, fields: frozenset = ASK_FIELDS) -> AskRequest | Response:
    """The ask in a request body, checked; or the JSON error response to send: 400 (unknown
    field, bad question, profile, log_path, chat_id or replace_last), 404 (no such chat),
    409 (corrupt chat, or nothing to replace)."""
    unknown = sorted(set(body) - fields)
    if unknown:
        return api_error(400, f"unknown field(s): {', '.join(unknown)}; history comes from "
                               "the stored chat (chat_id), never from the request")
    question = body.get("question")
    if not isinstance(question, str) or not question.strip():
        return api_error(400, "question must be a non-empty string")
    try:
        validate_message({"role": "user", "content": question})
    except InvalidMessage as exc:
        return api_error(400, f"question refused: {exc}")
    requested = body.get("profile")
    if requested is not None and not isinstance(requested, str):
        return api_error(400, "profile must be a string")
    try:
        profile = get_profile(requested)
    except UnknownProfile as exc:
        return api_error(400, str(exc.args[0]))
    log_path = body.get("log_path")
    if log_path is not None:
        if not isinstance(log_path, str) or not log_path or len(log_path) > 4096:
            return api_error(400, "log_path must be a path string")
        if not profile.holds(SCOPED_LOG):
            return api_error(400, f"profile {profile.name!r} cannot open logs")
    replace_last = body.get("replace_last", False)
    if not isinstance(replace_last, bool):
        return api_error(400, "replace_last must be true or false")
    chat_id = body.get("chat_id")
    history: list[dict[str, str]] = []
    if chat_id is not None:
        if not isinstance(chat_id, str) or not security.valid_chat_id(chat_id):
            return api_error(400, "malformed chat_id")
        try:
            history = dock_state().store.load(chat_id).history()  # never the stored sources
        except ChatNotFound:
            return api_error(404, f"no chat {chat_id}")
        except CorruptChat as exc:
            return api_error(409, str(exc))
    if replace_last:
        if [m["role"] for m in history[-2:]] != ["user", "assistant"]:
            return api_error(409, "replace_last: the chat has no last question and answer")
        history = history[:-2]
    return AskRequest(question=question, profile=profile, chat_id=chat_id, history=history,
                      log_path=log_path, replace_last=replace_last)


# The events a saved turn's record is made of (``turn_record.record_of_turn``).
RECORDED_EVENTS = ("profile", "findings", "capability")


def turn_events(state: DockState, ask: AskRequest,
                seen: dict[str, list]) -> Iterator[TurnEvent]:
    """The answer pipeline's events for ``ask`` with this process's retriever and chat
    client; one error event when those cannot be made. The data of the ``RECORDED_EVENTS``
    is also appended to ``seen`` (by type, in order) for the saved record."""
    try:
        retriever = state.get_retriever() if _may_retrieve(ask.profile) else None
        chat_client = state.get_chat_client()
    except Exception as exc:
        log.exception("ask: cannot prepare the index or the model client")
        yield TurnFailed.of(exc, "cannot prepare the turn").event()
        return
    settings = state.settings
    for event in run_turn(ask.turn_request(), settings, retriever=retriever,
                          chat_client=chat_client, ledger_path=settings.token_db_path,
                          host=settings.ai_host_name):
        if event.type in RECORDED_EVENTS:
            seen.setdefault(event.type, []).append(dict(event.data))
        yield event


@bp.post("/api/ask")
def ask():
    """``POST /api/ask``: runs one turn and streams its events as NDJSON (module docstring).

    Request errors answer JSON before streaming (``checked_ask``). Failures once streaming
    arrive as an "error" event; the turn is saved only after "done". The turn belongs to
    this response: a closed connection ends it (``/api/turns`` runs turns that outlive it).
    """
    body = json_object()
    if isinstance(body, Response):
        return body
    checked = checked_ask(body)
    if isinstance(checked, Response):
        return checked
    state = dock_state()
    log.info("ask: profile=%s chat=%s question_chars=%d", checked.profile.name,
             checked.chat_id or "new", len(checked.question))

    def generate() -> Iterator[str]:
        yield _ndjson("start", {"profile": checked.profile.name, "chat_id": checked.chat_id})
        seen: dict[str, list] = {}
        turn = turn_events(state, checked, seen)
        try:
            for event in turn:
                data = dict(event.data)
                if event.type == "done":
                    data["html"] = render_markdown(str(data.get("answer") or ""))
                    saved = save_turn(state, checked, data, seen)
                    yield _ndjson("done", data)
                    if saved is not None:
                        yield _ndjson("saved", saved)
                    return
                yield _ndjson(event.type, data)
                if event.type == "error":
                    return
        except Exception as exc:  # a bug or an unexpected failure: tell the page, keep the log
            log.exception("ask: the turn failed")
            yield _ndjson("error", {"message": f"the turn failed: {type(exc).__name__}: {exc}",
                                    "kind": "failure"})
        finally:
            # Closing the worker's generator ends the model stream when the browser goes away.
            turn.close()

    resp = Response(stream_with_context(generate()), mimetype="application/x-ndjson")
    resp.headers["X-Accel-Buffering"] = "no"
    return resp


def _may_retrieve(profile) -> bool:
    # chat never retrieves itself, but the worker may hand it to varaverk (escalation), which
    # needs the retriever to decide; the worker enforces the capability, not the dock.
    return profile.retrieves or profile.escalates_to is not None


def save_turn(state: DockState, ask: AskRequest, done: dict, seen: dict[str, list],
              stopped: bool = False) -> dict | None:
    """Store a completed (or stopped: partial, marked so) turn with its record
    (``turn_record.record_of_turn`` of ``done`` and ``seen``, the events ``turn_events``
    kept), and have long-term memory remember a completed one in the background; the
    ``saved`` event's data, or None when it could not be."""
    answer = done.get("answer")
    if not isinstance(answer, str):
        return None
    try:
        chat = state.store.append_turn(ask.chat_id, ask.question, answer, ask.profile.name,
                                       sources=done.get("sources"),
                                       index_head=done.get("index_head"),
                                       record=record_of_turn(done, ask.profile.name, seen),
                                       replace_last=ask.replace_last, stopped=stopped)
    except (InvalidMessage, ChatNotFound, CorruptChat, OSError) as exc:
        log.warning("ask: the completed turn was not saved: %s", exc)
        return {"chat_id": ask.chat_id, "title": None, "error": f"not saved: {exc}"}
    if not stopped:  # remembered in the background, after the stream; never a partial answer
        memory_api.remember_after_turn(state.settings, ask.profile.name, chat.id, ask.question,
                                       answer, ask.asked_at,
                                       getattr(state.retriever, "embedder", None))
    return {"chat_id": chat.id, "title": chat.title}


@bp.get("/api/chats")
def chats_list():
    """``GET /api/chats``: chat summaries newest first, problems with unreadable files, and
    ``kept``: how many chats are kept (``AI_CHAT_HISTORY_MAX``; older ones are pruned)."""
    store = dock_state().store
    chats, problems = store.list_chats()
    return jsonify({"chats": chats, "problems": problems, "kept": store.max_chats})


@bp.post("/api/chats")
def chats_create():
    """``POST /api/chats``: imports ``{"messages", "profile"?}`` as a new chat, 201
    ``{"chat": summary}``; 400 for unknown fields, an unknown profile or a refused message."""
    body = json_object()
    if isinstance(body, Response):
        return body
    unknown = sorted(set(body) - {"messages", "profile"})
    if unknown:
        return api_error(400, f"unknown field(s): {', '.join(unknown)}")
    profile = body.get("profile") or DEFAULT_PROFILE
    if not isinstance(profile, str) or profile not in PROFILES:
        return api_error(400, "unknown profile")
    try:
        chat = dock_state().store.create(body.get("messages", []), profile=profile)
    except InvalidMessage as exc:
        log.warning("refused a chat import: %s", exc)
        return api_error(400, f"messages refused: {exc}")
    return jsonify({"chat": chat.summary()}), 201


@bp.get("/api/chats/<chat_id>")
def chats_get(chat_id: str):
    """``GET /api/chats/<id>``: the summary and messages, assistant ones also rendered as
    sanitised ``html``; 400 malformed id, 404 no such chat, 409 corrupt file."""
    if not security.valid_chat_id(chat_id):
        return api_error(400, "malformed chat id")
    try:
        chat = dock_state().store.load(chat_id)
    except ChatNotFound:
        return api_error(404, f"no chat {chat_id}")
    except CorruptChat as exc:
        return api_error(409, str(exc))
    messages = [{**m, "html": render_markdown(m["content"]) if m["role"] == "assistant"
                 else None} for m in chat.messages]
    return jsonify({"chat": chat.summary(), "messages": messages})


@bp.delete("/api/chats/<chat_id>")
def chats_delete(chat_id: str):
    """``DELETE /api/chats/<id>``: 204; 400 malformed id, 404 no such chat. With
    ``?forget_memory=1`` its long-term memory is forgotten too."""
    if not security.valid_chat_id(chat_id):
        return api_error(400, "malformed chat id")
    try:
        dock_state().store.delete(chat_id)
    except ChatNotFound:
        return api_error(404, f"no chat {chat_id}")
    if request.args.get("forget_memory") in ("1", "true"):
        memory_api.forget_chat(chat_id)
    return Response(status=204)

