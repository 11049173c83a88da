"""The dock: Varaverk's chat page and its JSON API, as a Flask application factory.

Routes (all answers JSON unless noted; every ``/api`` route answers 503 while AI_ENABLED=false):

    GET    /                     the page (HTML), or the "disabled" page
    GET    /login, POST /login   token form when AI_DOCK_TOKEN is set (sets an HttpOnly cookie)
    GET    /healthz              "ok" (for service managers and tests; reveals nothing)
    GET    /api/profiles         the profiles: name, label, turns, retrieves, capabilities
    POST   /api/ask              {"question", "profile"?, "chat_id"?, "log_path"?} → NDJSON stream
                                 of turn events, one JSON object a line: {"type", "data"}
    GET    /api/chats            {"chats": [summary...], "problems": [...]} newest first
    POST   /api/chats            {"messages": [...]} → a new chat (an import), every message checked
    GET    /api/chats/<id>       {"chat": summary, "messages": [{"role","content","html"}]}
    DELETE /api/chats/<id>       204
    GET    /api/status           the index's status (files, chunks, model, last build, behind HEAD)
    GET    /api/tokens           token totals today / last 7 days / all time per host

Registered when installed: ``varaverk_dock.fleet_api`` (``GET /api/fleet/ledger``, which checks
the fleet token itself) and ``varaverk_dock.capabilities_api`` (log picker, bug reports).

The dock does not retrieve, prompt or generate itself: ``/api/ask`` runs the chat worker
(``varaverk_tools.ai_chat_worker.run_turn``), which does all of that and appends the ledger row
(source ``webgui``) when a turn completes. The dock adds what a browser needs: the stream as
NDJSON, the final answer re-rendered as sanitised HTML, and the conversation saved once the turn
is done (never after an error, so a partial reply is never stored as a finished answer).

Stream event types are the worker's (``profile``, ``sources``, ``capability``, ``thinking``,
``content``, ``findings``, ``done``, ``error``) plus the dock's own ``start`` (the profile and
chat the turn runs in) and ``saved`` (``{"chat_id", "title"}``, after the chat file was
written). ``done`` additionally carries ``html``.
"""

from __future__ import annotations

import importlib
import json
import logging
import subprocess
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

from flask import (Blueprint, Flask, Response, current_app, jsonify, redirect,
                   render_template, request, stream_with_context, url_for)
from werkzeug.exceptions import HTTPException

from varaverk.config import Settings, load_settings
from varaverk_dock import security
from varaverk_dock.conversations import (MAX_CONTENT_CHARS, ChatNotFound, ChatStore,
                                         CorruptChat, InvalidMessage, validate_message)
from varaverk_dock.profiles import DEFAULT_PROFILE, PROFILES, SCOPED_LOG, UnknownProfile, get_profile
from varaverk_dock.render import render_markdown

log = logging.getLogger("varaverk.dock")

# Any request body, chat imports included (larger: 413). Holds MAX_MESSAGES messages of about
# 5 KB each; an import of many near-MAX_CONTENT_CHARS messages is refused as too large.
MAX_BODY_BYTES = 1024 * 1024
ASK_FIELDS = frozenset({"question", "profile", "chat_id", "log_path"})
EXTENSION = "varaverk_dock"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; "
       "object-src 'none'")


@dataclass
class DockState:
    """What one dock process holds: settings, the chat store and, made once, the retriever
    and chat client the worker uses (one per process, created lazily after gunicorn forks)."""

    settings: Settings
    store: ChatStore
    loopback: bool
    retriever: Any = None
    chat_client: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def get_chat_client(self):
        """The process's chat client (``varaverk.generation.make_chat_client``), made once."""
        if self.chat_client is None:
            with self._lock:
                if self.chat_client is None:
                    from varaverk.generation import make_chat_client
                    self.chat_client = make_chat_client(self.settings)
        return self.chat_client

    def get_retriever(self):
        """The process's retriever, made once; None while no usable index exists (the worker
        then reports that itself, and the next ask tries again)."""
        if self.retriever is None:
            with self._lock:
                if self.retriever is None:
                    from varaverk.search import Retriever
                    try:
                        self.retriever = Retriever(self.settings)
                    except Exception as exc:  # IndexMissing, IndexMismatch, embedder errors
                        log.warning("retriever unavailable: %s", exc)
                        return None
        return self.retriever


def _state() -> DockState:
    return current_app.extensions[EXTENSION]


def _api_error(status: int, message: str, **extra) -> Response:
    resp = jsonify({"error": message, **extra})
    resp.status_code = status
    return resp


def _ndjson(event_type: str, data: dict) -> str:
    return json.dumps({"type": event_type, "data": data}, ensure_ascii=False,
                      default=str) + "\n"


def _presented_token() -> str | None:
    header = request.headers.get(security.TOKEN_HEADER)
    if header:
        return header
    auth = request.headers.get("Authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return None


# ── request checks ────────────────────────────────────────────────────────────────────────

def _guard():
    """Runs before every request: host check, token, same-origin for state changes."""
    state = _state()
    settings = state.settings
    token = settings.ai_dock_token
    if not token and state.loopback and not security.host_allowed(request.host):
        # DNS rebinding: a foreign name resolving to 127.0.0.1 must not reach the chats.
        return _api_error(403, "Host header is not a loopback name")
    if request.endpoint in ("static", "dock.healthz"):
        return None
    if request.blueprint == "fleet":
        return None  # the fleet API authenticates partners with AI_FLEET_TOKEN itself
    if request.method not in ("GET", "HEAD", "OPTIONS"):
        allowed, reason = security.same_origin(request.headers, request.host_url)
        if not allowed:
            log.warning("refused %s %s: %s", request.method, request.path, reason)
            return _api_error(403, reason)
    if token and request.endpoint not in ("dock.login", "dock.login_post"):
        if security.token_ok(_presented_token(), token):
            return None
        if security.cookie_ok(request.cookies.get(security.TOKEN_COOKIE), token):
            return None
        url_token = request.args.get("token")
        if request.method == "GET" and url_token is not None and not request.path.startswith("/api/"):
            if security.token_ok(url_token, token):
                return _login_response(url_for("dock.index"))
            log.warning("refused a wrong token in the URL of %s", request.path)
        if request.path.startswith("/api/"):
            return _api_error(401, "token required (header X-Varaverk-Token or log in)")
        return redirect(url_for("dock.login"))
    return None


def _login_response(target: str) -> Response:
    resp = redirect(target)
    resp.set_cookie(security.TOKEN_COOKIE,
                    security.session_cookie_value(_state().settings.ai_dock_token),
                    httponly=True, samesite="Strict", secure=request.is_secure,
                    max_age=30 * 24 * 3600)
    return resp


def _headers(resp: Response) -> Response:
    resp.headers.setdefault("Content-Security-Policy", CSP)
    resp.headers.setdefault("X-Content-Type-Options", "nosniff")
    resp.headers.setdefault("Referrer-Policy", "same-origin")
    resp.headers.setdefault("X-Frame-Options", "DENY")
    if request.path.startswith("/api/") or request.path in ("/", "/login"):
        resp.headers.setdefault("Cache-Control", "no-store")
    return resp


# ── routes ────────────────────────────────────────────────────────────────────────────────

bp = Blueprint("dock", __name__)


@bp.get("/favicon.ico")
def favicon():
    """``GET /favicon.ico``: a permanent redirect to the static SVG icon."""
    return redirect(url_for("static", filename="favicon.svg"), code=301)


@bp.get("/healthz")
def healthz():
    """``GET /healthz``: "ok" as plain text; passes the token check and reveals nothing."""
    return Response("ok\n", mimetype="text/plain")


@bp.get("/")
def index():
    """``GET /``: the chat page, or the "disabled" page while AI_ENABLED=false."""
    settings = _state().settings
    if not settings.ai_enabled:
        return render_template("disabled.html", host=settings.ai_host_name)
    profiles = [{"name": p.name, "label": p.label} for p in PROFILES.values()]
    return render_template("index.html", profiles=profiles, default_profile=DEFAULT_PROFILE,
                           host=settings.ai_host_name)


@bp.get("/login")
def login():
    """``GET /login``: the token form; a redirect to ``/`` when no AI_DOCK_TOKEN is set."""
    if not _state().settings.ai_dock_token:
        return redirect(url_for("dock.index"))
    return render_template("login.html", error=None)


@bp.post("/login")
def login_post():
    """``POST /login``: sets the session cookie for the right token; 401 and the form again
    for a wrong one."""
    token = _state().settings.ai_dock_token
    if not token:
        return redirect(url_for("dock.index"))
    if security.token_ok(request.form.get("token", ""), token):
        return _login_response(url_for("dock.index"))
    log.warning("refused a wrong token at /login from %s", request.remote_addr)
    return render_template("login.html", error="That token is not right."), 401


@bp.before_request
def _gate():
    if request.path.startswith("/api/") and not _state().settings.ai_enabled:
        return _api_error(503, "Varaverk is disabled on this host (AI_ENABLED=false)")
    return None


@bp.get("/api/profiles")
def profiles():
    """``GET /api/profiles``: the default profile and every profile's name, label, history
    turns, retrieval, capabilities (sorted) and escalation target."""
    return jsonify({"default": DEFAULT_PROFILE, "profiles": [
        {"name": p.name, "label": p.label, "history_turns": p.history_turns,
         "retrieves": p.retrieves, "capabilities": sorted(p.capabilities),
         "escalates_to": p.escalates_to} for p in PROFILES.values()]})


def _json_object() -> dict | Response:
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        return _api_error(400, "expected a JSON object body")
    return body


@bp.post("/api/ask")
def ask():
    """``POST /api/ask``: runs one turn and streams its events as NDJSON (module docstring).

    Request errors answer JSON before streaming: 400 (unknown field, bad question, profile,
    log_path or chat_id), 404 (no such chat), 409 (corrupt chat). Failures once streaming
    arrive as an "error" event; the turn is saved only after "done".
    """
    body = _json_object()
    if isinstance(body, Response):
        return body
    unknown = sorted(set(body) - ASK_FIELDS)
    if unknown:
        return _api_error(400, f"unknown field(s): {', '.join(unknown)}; history comes from "
                               "the stored chat (chat_id), never from the request")
    question = body.get("question")
    if not isinstance(question, str) or not question.strip():
        return _api_error(400, "question must be a non-empty string")
    try:
        validate_message({"role": "user", "content": question})
    except InvalidMessage as exc:
        return _api_error(400, f"question refused: {exc}")
    requested = body.get("profile")
    if requested is not None and not isinstance(requested, str):
        return _api_error(400, "profile must be a string")
    try:
        profile = get_profile(requested)
    except UnknownProfile as exc:
        return _api_error(400, str(exc.args[0]))
    log_path = body.get("log_path")
    if log_path is not None:
        if not isinstance(log_path, str) or not log_path or len(log_path) > 4096:
            return _api_error(400, "log_path must be a path string")
        if not profile.holds(SCOPED_LOG):
            return _api_error(400, f"profile {profile.name!r} cannot open logs")
    state = _state()
    chat_id = body.get("chat_id")
    history: list[dict[str, str]] = []
    if chat_id is not None:
        if not isinstance(chat_id, str) or not security.valid_chat_id(chat_id):
            return _api_error(400, "malformed chat_id")
        try:
            history = state.store.load(chat_id).messages
        except ChatNotFound:
            return _api_error(404, f"no chat {chat_id}")
        except CorruptChat as exc:
            return _api_error(409, str(exc))

    from varaverk_tools.ai_chat_worker import TurnRequest, run_turn

    turn_request = TurnRequest(profile=profile.name, question=question, history=history,
                               log_path=log_path, source="webgui")
    settings = state.settings
    log.info("ask: profile=%s chat=%s question_chars=%d", profile.name, chat_id or "new",
             len(question))

    def generate() -> Iterator[str]:
        yield _ndjson("start", {"profile": profile.name, "chat_id": chat_id})
        try:
            retriever = state.get_retriever() if _may_retrieve(profile) else None
            chat_client = state.get_chat_client()
        except Exception as exc:
            log.exception("ask: cannot prepare the model client")
            yield _ndjson("error", {"message": f"cannot reach the model server: {exc}"})
            return
        turn = run_turn(turn_request, settings, retriever=retriever, chat_client=chat_client,
                        ledger_path=settings.token_db_path, host=settings.ai_host_name)
        try:
            for event in turn:
                data = dict(event.data)
                if event.type == "done":
                    data["html"] = render_markdown(str(data.get("answer") or ""))
                    saved = _save_turn(state, chat_id, question, data, profile.name)
                    yield _ndjson("done", data)
                    if saved is not None:
                        yield _ndjson("saved", saved)
                    return
                yield _ndjson(event.type, data)
                if event.type == "error":
                    return
        except Exception as exc:  # a bug or an unexpected failure: tell the page, keep the log
            log.exception("ask: the turn failed")
            yield _ndjson("error", {"message": f"the turn failed: {type(exc).__name__}: {exc}"})
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


def _save_turn(state: DockState, chat_id: str | None, question: str, done: dict,
               profile: str) -> dict | None:
    """Store the completed turn; the ``saved`` event's data, or None when it could not be."""
    answer = done.get("answer")
    if not isinstance(answer, str):
        return None
    try:
        chat = state.store.append_turn(chat_id, question, answer, profile)
    except (InvalidMessage, ChatNotFound, CorruptChat, OSError) as exc:
        log.warning("ask: the completed turn was not saved: %s", exc)
        return {"chat_id": chat_id, "title": None, "error": f"not saved: {exc}"}
    return {"chat_id": chat.id, "title": chat.title}


@bp.get("/api/chats")
def chats_list():
    """``GET /api/chats``: chat summaries newest first, and problems with unreadable files."""
    chats, problems = _state().store.list_chats()
    return jsonify({"chats": chats, "problems": problems})


@bp.post("/api/chats")
def chats_create():
    """``POST /api/chats``: imports ``{"messages", "profile"?}`` as a new chat, 201
    ``{"chat": summary}``; 400 for unknown fields, an unknown profile or a refused message."""
    body = _json_object()
    if isinstance(body, Response):
        return body
    unknown = sorted(set(body) - {"messages", "profile"})
    if unknown:
        return _api_error(400, f"unknown field(s): {', '.join(unknown)}")
    profile = body.get("profile") or DEFAULT_PROFILE
    if not isinstance(profile, str) or profile not in PROFILES:
        return _api_error(400, "unknown profile")
    try:
        chat = _state().store.create(body.get("messages", []), profile=profile)
    except InvalidMessage as exc:
        log.warning("refused a chat import: %s", exc)
        return _api_error(400, f"messages refused: {exc}")
    return jsonify({"chat": chat.summary()}), 201


@bp.get("/api/chats/<chat_id>")
def chats_get(chat_id: str):
    """``GET /api/chats/<id>``: the summary and messages, assistant ones also rendered as
    sanitised ``html``; 400 malformed id, 404 no such chat, 409 corrupt file."""
    if not security.valid_chat_id(chat_id):
        return _api_error(400, "malformed chat id")
    try:
        chat = _state().store.load(chat_id)
    except ChatNotFound:
        return _api_error(404, f"no chat {chat_id}")
    except CorruptChat as exc:
        return _api_error(409, str(exc))
    messages = [{**m, "html": render_markdown(m["content"]) if m["role"] == "assistant"
                 else None} for m in chat.messages]
    return jsonify({"chat": chat.summary(), "messages": messages})


@bp.delete("/api/chats/<chat_id>")
def chats_delete(chat_id: str):
    """``DELETE /api/chats/<id>``: 204; 400 malformed id, 404 no such chat."""
    if not security.valid_chat_id(chat_id):
        return _api_error(400, "malformed chat id")
    try:
        _state().store.delete(chat_id)
    except ChatNotFound:
        return _api_error(404, f"no chat {chat_id}")
    return Response(status=204)


def _repo_head(settings: Settings) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(settings.ai_repo_root), "rev-parse", "HEAD"],
                             capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


@bp.get("/api/status")
def status():
    """``GET /api/status``: the index's files, chunks, model, last build and whether it is
    behind the repository's HEAD; ``{"present": false, "message"}`` when it cannot be opened."""
    settings = _state().settings
    try:
        from varaverk.store import Index, IndexMissing
    except ImportError:
        return jsonify({"present": False, "message": "the index module is not installed"})
    try:
        index = Index.open(settings.index_path, readonly=True)
    except IndexMissing:
        return jsonify({"present": False,
                        "message": "no index yet: run ai-index on this host"})
    except Exception as exc:
        log.warning("status: cannot open the index: %s", exc)
        return jsonify({"present": False, "message": f"the index cannot be opened: {exc}"})
    try:
        raw = index.status()
    finally:
        close = getattr(index, "close", None)
        if close:
            close()
    meta = raw.get("meta", {})
    head = _repo_head(settings)
    built_head = meta.get("head") or None
    info = {
        "present": True,
        "files": sum(raw.get("files_by_kind", {}).values()),
        "chunks": raw.get("chunks", 0),
        "files_by_kind": raw.get("files_by_kind", {}),
        "chunks_by_kind": raw.get("chunks_by_kind", {}),
        "skipped": len(raw.get("skipped", [])),
        "partial": len(raw.get("partial", [])),
        "backend": meta.get("embed_backend"),
        "model": meta.get("embed_model"),
        "dimension": meta.get("embed_dimension"),
        "built_at": meta.get("built_at"),
        "build_seconds": meta.get("build_seconds"),
        "head": built_head,
        "repo_head": head,
        "behind": bool(head and built_head and head != built_head),
        "size_bytes": raw.get("size_bytes"),
    }
    return jsonify(info)


@bp.get("/api/tokens")
def tokens():
    """``GET /api/tokens``: ledger token totals (today, last 7 days, all time) per host;
    500 when the totals cannot be computed."""
    settings = _state().settings
    try:
        from varaverk.ledger import fleet_totals
    except ImportError:
        return _api_error(501, "the ledger module is not installed")
    try:
        return jsonify(fleet_totals(settings).as_dict())
    except ValueError as exc:
        return _api_error(500, f"token totals unavailable: {exc}")


# ── the factory ───────────────────────────────────────────────────────────────────────────

def create_app(settings: Settings | None = None, *, retriever=None, chat_client=None) -> Flask:
    """Build the dock application.

    Args:
        settings: the configuration (default: ``load_settings()``, which reads ``AI_CONFIG``).
        retriever: a ``varaverk.search.Retriever`` to share (default: one made lazily per
            process on the first ask that needs it).
        chat_client: a ``varaverk.generation.ChatClient`` (default: made lazily per process).

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
    app.extensions[EXTENSION] = DockState(
        settings=settings,
        store=ChatStore(settings.ai_data_dir / "ai_chats", settings.ai_host_name,
                        settings.ai_chat_history_max),
        loopback=loopback, retriever=retriever, chat_client=chat_client)
    app.before_request(_guard)
    app.after_request(_headers)
    app.register_blueprint(bp)
    # Blueprints of other areas, registered when installed: the fleet ledger endpoint
    # (authenticates partners itself) and the capabilities' log picker and bug filing
    # (behind this app's guard like every other route).
    for module in ("varaverk_dock.fleet_api", "varaverk_dock.capabilities_api"):
        try:
            blueprint = importlib.import_module(module).bp
        except ImportError as exc:
            log.debug("%s not registered: %s", module, exc)
            continue
        app.register_blueprint(blueprint)

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException):
        if request.path.startswith("/api/"):
            return _api_error(exc.code or 500, exc.description or exc.name)
        return exc

    app.logger.debug("dock ready (loopback=%s, chats=%s, max body %d bytes, message cap %d)",
                     loopback, settings.ai_data_dir / "ai_chats", MAX_BODY_BYTES,
                     MAX_CONTENT_CHARS)
    return app
