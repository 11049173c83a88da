"""Turns that live on the server: started by one request, followed by any number of pages.

    POST /api/turns                  {"question", "profile"?, "chat_id"?, "log_path"?,
                                      "replace_last"?} → 202 {"turn_id", "events"}
    GET  /api/turns?chat_id=ID       {"running": turn_id or null}: the conversation's live turn
    GET  /api/turns/<id>/events      the turn as Server-Sent Events, from the start or after
                                     ``Last-Event-ID`` (header) / ``?after=N``
    POST /api/turns/<id>/stop        202 {"status"}: stops the turn for every page

The turn runs in a thread of the worker that accepted it (``varaverk.answering.turn_runner``) and
writes every event to the turn log (``varaverk.answering.turn_log``, ``AI_DATA_DIR/turns.sqlite``),
so it goes on with no page attached, and a reload, a second tab or another gunicorn worker
replays it from the log. Each SSE message is ``id: <seq>`` and ``data: {"seq", "type",
"data"}``, the types those of ``/api/ask`` (``start`` carries the question) plus ``stopped``
(the partial answer, saved and marked stopped). After ``done`` or ``stopped`` comes ``saved``;
the stream then ends. ``replace_last`` (regenerate, edit and resend) leaves the chat's last
question and answer out of the history and replaces them when the turn is saved.

Bounds: ``AI_DOCK_MAX_TURNS`` turns at once (429 beyond), one running turn per conversation
(409 naming it, so a second tab attaches instead), ``AI_DOCK_MAX_STREAMS`` attached streams
per worker (429 beyond); loopback and token rules as for every route (``guard``).
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Iterator

from flask import Blueprint, Response, jsonify, request, url_for

from varaverk.answering.turn_log import ChatBusy, TurnsBusy, valid_turn_id
from varaverk_dock import security
from varaverk_dock.chat_api import TURN_FIELDS, AskRequest, checked_ask, save_turn, turn_events
from varaverk_dock.errors import api_error, json_object
from varaverk_dock.render import render_markdown
from varaverk_dock.state import DockState, dock_state

log = logging.getLogger("varaverk.dock")

bp = Blueprint("turns", __name__)

# How soon a dropped EventSource reconnects (milliseconds), and how long a quiet stream waits
# before a keep-alive comment (which also finds a closed tab).
RECONNECT_MS = 1000
KEEPALIVE_SECONDS = 15.0


@bp.post("/api/turns")
def start_turn():
    """``POST /api/turns``: starts a turn; 202 ``{"turn_id", "events"}``. Errors: those of
    ``chat_api.checked_ask``, 409 ``{"error", "turn_id"}`` when the chat has a running turn,
    429 when AI_DOCK_MAX_TURNS turns run."""
    body = json_object()
    if isinstance(body, Response):
        return body
    checked = checked_ask(body, TURN_FIELDS)
    if isinstance(checked, Response):
        return checked
    state = dock_state()
    start = {"question": checked.question, "profile": checked.profile.name,
             "chat_id": checked.chat_id, "replace_last": checked.replace_last}
    try:
        turn_id = state.turn_log.begin(checked.chat_id, state.settings.ai_dock_max_turns, start)
    except ChatBusy as exc:
        resp = jsonify({"error": str(exc), "turn_id": exc.turn_id})
        return resp, 409
    except TurnsBusy as exc:
        return api_error(429, str(exc))
    log.info("turn %s: profile=%s chat=%s question_chars=%d%s", turn_id, checked.profile.name,
             checked.chat_id or "new", len(checked.question),
             " (replacing the last answer)" if checked.replace_last else "")
    seen: dict[str, list] = {}
    state.turn_runner.start(turn_id, turn_events(state, checked, seen),
                            _finisher(state, checked, seen))
    return jsonify({"turn_id": turn_id,
                    "events": url_for("turns.turn_events_stream", turn_id=turn_id)}), 202


def _finisher(state: DockState, ask: AskRequest, seen: dict[str, list]):
    """The runner's finish hook: the answer rendered as sanitised HTML, then saved with the
    record of the events ``seen`` (``chat_api.turn_events``)."""
    def finish(kind: str, data: dict) -> list:
        data["html"] = render_markdown(str(data.get("answer") or ""))
        saved = save_turn(state, ask, data, seen, stopped=kind == "stopped")
        return [("saved", saved)] if saved is not None else []
    return finish


@bp.get("/api/turns")
def running_turn():
    """``GET /api/turns?chat_id=ID``: ``{"running": id}`` of the chat's running turn or null;
    400 for a malformed chat id."""
    chat_id = request.args.get("chat_id", "")
    if not security.valid_chat_id(chat_id):
        return api_error(400, "chat_id: a conversation id is required")
    return jsonify({"running": dock_state().turn_log.running_in(chat_id)})


@bp.post("/api/turns/<turn_id>/stop")
def stop_turn(turn_id: str):
    """``POST /api/turns/<id>/stop``: 202 ``{"status"}`` (the turn's status now; a finished
    turn stays as it was); 400 malformed id, 404 no such turn."""
    if not valid_turn_id(turn_id):
        return api_error(400, "malformed turn id")
    state = dock_state()
    info = state.turn_log.request_stop(turn_id)
    if info is None:
        return api_error(404, f"no turn {turn_id}")
    if info["status"] == "running":
        # Ours: stop now. Another worker's: its watcher sees the request within a poll.
        state.turn_runner.stop_here(turn_id)
        log.info("turn %s: stop requested", turn_id)
    return jsonify({"status": state.turn_log.info(turn_id)["status"]}), 202


@bp.get("/api/turns/<turn_id>/events")
def turn_events_stream(turn_id: str):
    """``GET /api/turns/<id>/events``: the turn as Server-Sent Events after ``Last-Event-ID``
    (or ``?after=N``; default: from the start). 400 malformed id or position, 404 no such
    turn (or pruned), 429 when AI_DOCK_MAX_STREAMS streams are attached to this worker."""
    if not valid_turn_id(turn_id):
        return api_error(400, "malformed turn id")
    raw = request.headers.get("Last-Event-ID") or request.args.get("after") or "0"
    if not raw.isdigit() or len(raw) > 9:
        return api_error(400, "Last-Event-ID / after: a whole number is required")
    state = dock_state()
    if state.turn_log.info(turn_id) is None:
        return api_error(404, f"no turn {turn_id} (finished turns are kept "
                              f"{state.settings.ai_dock_turn_retain_hours:g} h)")
    if not state.streams.acquire(blocking=False):
        return api_error(429, f"{state.settings.ai_dock_max_streams} answer streams are "
                              "attached to this dock process already (AI_DOCK_MAX_STREAMS)")
    stream = _Attached(state, turn_id, int(raw))
    resp = Response(stream, mimetype="text/event-stream")
    resp.headers["X-Accel-Buffering"] = "no"
    return resp


class _Attached:
    """One attached stream: the SSE text of a turn's events; gives its place under the cap
    back when the response is closed, however it ends (finished, tab closed, never read)."""

    def __init__(self, state: DockState, turn_id: str, after: int):
        self.state, self.turn_id, self.after = state, turn_id, after
        self._released = False
        self._lock = threading.Lock()

    def __iter__(self) -> Iterator[str]:
        yield f"retry: {RECONNECT_MS}\n\n"
        for event in self.state.turn_log.follow(self.turn_id, self.after,
                                                idle_seconds=KEEPALIVE_SECONDS):
            if event is None:
                yield ": keep-alive\n\n"
                continue
            seq, kind, data = event
            yield (f"id: {seq}\ndata: {{\"seq\": {seq}, \"type\": {json.dumps(kind)}, "
                   f"\"data\": {data}}}\n\n")

    def close(self) -> None:
        with self._lock:
            if not self._released:
                self._released = True
                self.state.streams.release()
