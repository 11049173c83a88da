"""The dock: Varaverk's chat page and its JSON API, as a Flask application factory.

Blueprints, each in its own module, none importing this one:

    pages              GET /, /login, POST /login, /healthz, /favicon.ico
    chat_api           /api/profiles, /api/ask (NDJSON stream), /api/chats[/<id>]
    turns_api          /api/turns: turns that run on the server, followed as Server-Sent Events
    status_api         /api/status, /api/tokens
    fleet_api          GET /api/fleet/ledger (checks the fleet token itself)
    capabilities_api   the troubleshoot log picker and bug reports
    similar_api        GET /api/similar (the sections nearest to a source)
    memory_api         /api/memory: long-term memory listed and forgotten

Every ``/api`` route answers 503 while AI_ENABLED=false. Every request passes
``guard.guard`` first (Host, token, same-origin); errors under ``/api`` are JSON
(``errors.register``).
"""

from __future__ import annotations

import logging
import threading

from flask import Flask

from varaverk.answering.turn_log import TurnLog
from varaverk.answering.turn_runner import TurnRunner
from varaverk.config import Settings, load_settings
from varaverk_dock import (capabilities_api, chat_api, errors, fleet_api, guard, memory_api,
                           pages, security, similar_api, status_api, turns_api)
from varaverk_dock.conversations import MAX_CONTENT_CHARS, ChatStore
from varaverk_dock.state import EXTENSION, DockState

log = logging.getLogger("varaverk.dock")

# Any request body, chat imports included (larger: 413). Holds MAX_MESSAGES messages of about
# 5 KB each; an import of many near-MAX_CONTENT_CHARS messages is refused as too large.
MAX_BODY_BYTES = 1024 * 1024


def create_app(settings: Settings | None = None, *, retriever=None, chat_client=None) -> Flask:
    """Build the dock application.

    Args:
        settings: the configuration (default: ``load_settings()``, which reads ``AI_CONFIG``).
        retriever: a ``varaverk.retrieval.search.Retriever`` to share (default: one made lazily per
            process on the first ask that needs it).
        chat_client: a ``varaverk.answering.generation.streaming.ChatClient`` (default: made
            lazily per process).

    Raises:
        ConfigError: ``AI_DOCK_BIND`` is malformed, or not loopback while ``AI_DOCK_TOKEN`` is
            empty (the dock refuses to serve the network without a token).
    """
    settings = settings or load_settings()
    loopback = security.check_bind(settings.ai_dock_bind, settings.ai_dock_token)
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    app.config["JSON_SORT_KEYS"] = False
    app.json.sort_keys = False
    turn_log = TurnLog(settings.ai_data_dir / "turns.sqlite",
                       retain_seconds=settings.ai_dock_turn_retain_hours * 3600)
    app.extensions[EXTENSION] = DockState(
        settings=settings,
        store=ChatStore(settings.ai_data_dir / "ai_chats", settings.ai_host_name,
                        settings.ai_chat_history_max),
        loopback=loopback, retriever=retriever, chat_client=chat_client,
        turn_log=turn_log, turn_runner=TurnRunner(turn_log),
        streams=threading.BoundedSemaphore(settings.ai_dock_max_streams))
    app.before_request(guard.guard)
    # One gate for every /api route, the fleet ledger included (it skips the dock token).
    app.before_request(errors.disabled_gate)
    app.after_request(guard.add_headers)
    for module in (pages, chat_api, turns_api, status_api, fleet_api, capabilities_api,
                   similar_api, memory_api):
        app.register_blueprint(module.bp)
    errors.register(app)

    app.logger.debug("dock ready (loopback=%s, chats=%s, max body %d bytes, message cap %d)",
                     loopback, settings.ai_data_dir / "ai_chats", MAX_BODY_BYTES,
                     MAX_CONTENT_CHARS)
    return app
