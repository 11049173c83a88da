"""Long-term memory in the dock: its routes, and the hooks the chat API calls.

    GET    /api/memory                      {"enabled", "conversations": [{"id", "turns",
                                            "triplets", "first", "last", "opening"}]} most
                                            recent first (opening: its first turn's start)
    GET    /api/memory/conversations/<id>   {"triplets": [{"id", "turns": [first, last],
                                            "said_at", "digest", "status", "facts",
                                            "recollection"}]}
    DELETE /api/memory/conversations/<id>   {"forgot": turns removed}
    DELETE /api/memory/triplets/<id>        {"forgot": turns removed}; 404 when none

A memory conversation of the dock is its chat id. Hooks:

* ``remember_after_turn``: after a turn is saved, its question and answer are remembered and
  digested in a background thread, so the answer's stream never waits for memory;
* ``forget_chat``: ``DELETE /api/chats/<id>?forget_memory=1`` also forgets what memory kept
  of that chat (the page asks first).

With ``AI_MEMORY_ENABLED=false`` nothing is remembered and the listing is empty; forgetting
what an earlier run kept still works. Reading creates no memory file.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading

from flask import Blueprint, jsonify

from varaverk.answering.profiles import MEMORY, get_profile
from varaverk.answering.remembering import remember_turn
from varaverk_dock.errors import api_error
from varaverk_dock.state import dock_state

log = logging.getLogger("varaverk.dock.memory")

bp = Blueprint("memory", __name__)
MAX_ID_CHARS = 200


def _settings():
    return dock_state().settings


def _memory(settings):
    """The HostMemory, or None when no memory file exists (nothing to read or forget)."""
    if not settings.memory_path.is_file():
        return None
    from varaverk.memory.host_memory import HostMemory  # numpy and the store: on need
    return HostMemory(settings)


def _valid_id(conversation: str) -> bool:
    return 0 < len(conversation) <= MAX_ID_CHARS and conversation.isprintable()


@bp.get("/api/memory")
def memory_list():
    """``GET /api/memory``: whether memory is on, and its conversations."""
    settings = _settings()
    memory = _memory(settings)
    if memory is None:
        return jsonify({"enabled": settings.ai_memory_enabled, "conversations": []})
    with memory:
        rows = memory.store.overview()
    return jsonify({"enabled": settings.ai_memory_enabled, "conversations": [
        {"id": c, "turns": n, "triplets": t, "first": first, "last": last, "opening": opening}
        for c, n, t, first, last, opening in rows]})


@bp.get("/api/memory/conversations/<path:conversation>")
def memory_conversation(conversation: str):
    """``GET /api/memory/conversations/<id>``: its triplets with facts and recollections."""
    if not _valid_id(conversation):
        return api_error(400, "malformed conversation id")
    memory = _memory(_settings())
    if memory is None:
        return jsonify({"triplets": []})
    with memory:
        store = memory.store
        said = {t.seq: t.said_at for t in store.turns(conversation)}
        triplets = [{"id": r.id, "turns": [r.first_seq, r.last_seq],
                     "said_at": said.get(r.first_seq, ""), "digest": r.digest,
                     "status": r.status, "recollection": store.recollection(r.id),
                     "facts": [{"statement": f.statement, "speaker": f.speaker, "type": f.type}
                               for f in store.facts(r.id)]}
                    for r in store.triplets(conversation)]
    return jsonify({"triplets": triplets})


@bp.delete("/api/memory/conversations/<path:conversation>")
def memory_forget_conversation(conversation: str):
    """``DELETE /api/memory/conversations/<id>``: forget its turns, facts and vectors."""
    if not _valid_id(conversation):
        return api_error(400, "malformed conversation id")
    return jsonify({"forgot": forget_chat(conversation)})


@bp.delete("/api/memory/triplets/<int:triplet_id>")
def memory_forget_triplet(triplet_id: int):
    """``DELETE /api/memory/triplets/<id>``: forget one triplet (and the turns it quotes)."""
    memory = _memory(_settings())
    forgot = 0
    if memory is not None:
        with memory:
            forgot = memory.store.forget_triplet(triplet_id)
    if not forgot:
        return api_error(404, f"no triplet {triplet_id}")
    return jsonify({"forgot": forgot})


def forget_chat(conversation: str) -> int:
    """Forget what memory kept of one conversation (a chat id); returns the turns removed."""
    memory = _memory(_settings())
    if memory is None:
        return 0
    with memory:
        return memory.store.forget_conversation(conversation)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None).isoformat(timespec="seconds")


def remember_after_turn(settings, profile: str, chat_id: str, question: str, answer: str,
                        asked_at: str, embedder=None) -> threading.Thread | None:
    """Remember a saved turn in a background thread (started and returned; None when the
    profile does not hold memory or memory is off): the stream has already ended."""
    chosen = get_profile(profile)
    if not (settings.ai_memory_enabled and chosen.holds(MEMORY) and chat_id):
        return None
    worker = threading.Thread(target=remember_turn, name=f"remember-{chat_id}", daemon=True,
                              args=(settings, chosen, chat_id, question, answer, asked_at,
                                    _now(), embedder))
    worker.start()
    return worker


def asked_now() -> str:
    """The time a question arrived, as memory records it (UTC, ISO 8601, seconds)."""
    return _now()
