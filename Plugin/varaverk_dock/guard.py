"""Checks every request passes before a view runs, and headers every response gets.

``guard`` (before each request): the Host check against DNS rebinding on loopback, the token
(header, cookie, or a one-time ``?token=`` on a page URL), same-origin for state changes.
``add_headers`` (after each request): CSP, nosniff, referrer and frame policies, no-store.
The primitives (constant-time compare, origin rules) live in ``varaverk_dock.security``.
"""

from __future__ import annotations

import logging

from flask import Response, redirect, request, url_for

from varaverk_dock import security
from varaverk_dock.errors import api_error
from varaverk_dock.state import dock_state

log = logging.getLogger("varaverk.dock")

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; "
       "object-src 'none'")


def presented_token() -> str | None:
    header = request.headers.get(security.TOKEN_HEADER)
    if header:
        return header
    auth = request.headers.get("Authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return None



def arrived_on_loopback() -> bool:
    """True unless the request came in on a non-loopback local address of gunicorn's socket
    (a hand-run gunicorn without Deployment/gunicorn.conf.py skips the start-up check)."""
    sock = request.environ.get("gunicorn.socket")
    try:
        local = sock.getsockname() if sock is not None else None
    except OSError:
        return False
    return not isinstance(local, tuple) or security.is_loopback_host(str(local[0]))


def guard():
    """Runs before every request: host check, token, same-origin for state changes."""
    state = dock_state()
    settings = state.settings
    token = settings.ai_dock_token
    if not token and not arrived_on_loopback():
        log.warning("refused %s %s: arrived on a network address without AI_DOCK_TOKEN",
                    request.method, request.path)
        return api_error(403, "this dock has no AI_DOCK_TOKEN and answers on loopback only")
    if not token and state.loopback and not security.host_allowed(request.host):
        # DNS rebinding: a foreign name resolving to 127.0.0.1 must not reach the chats.
        return api_error(403, "Host header is not a loopback name")
    if request.endpoint in ("static", "dock.healthz"):
        return None
    if request.blueprint == "fleet":
        return None  # the fleet API authenticates partners with AI_FLEET_TOKEN itself
    if request.method not in ("GET", "HEAD", "OPTIONS"):
        allowed, reason = security.same_origin(request.headers, request.host_url)
        if not allowed:
            log.warning("refused %s %s: %s", request.method, request.path, reason)
            return api_error(403, reason)
    if token and request.endpoint not in ("dock.login", "dock.login_post"):
        if security.token_ok(presented_token(), token):
            return None
        if security.cookie_ok(request.cookies.get(security.TOKEN_COOKIE), token):
            return None
        url_token = request.args.get("token")
        if request.method == "GET" and url_token is not None and not request.path.startswith("/api/"):
            if security.token_ok(url_token, token):
                return login_response(url_for("dock.index"))
            log.warning("refused a wrong token in the URL of %s", request.path)
        if request.path.startswith("/api/"):
            return api_error(401, "token required (header X-Varaverk-Token or log in)")
        return redirect(url_for("dock.login"))
    return None


def login_response(target: str) -> Response:
    resp = redirect(target)
    resp.set_cookie(security.TOKEN_COOKIE,
                    security.session_cookie_value(dock_state().settings.ai_dock_token),
                    httponly=True, samesite="Strict", secure=request.is_secure,
                    max_age=30 * 24 * 3600)
    return resp


def add_headers(resp: Response) -> Response:
    resp.headers.setdefault("Content-Security-Policy", CSP)
    resp.headers.setdefault("X-Content-Type-Options", "nosniff")
    resp.headers.setdefault("Referrer-Policy", "same-origin")
    resp.headers.setdefault("X-Frame-Options", "DENY")
    if request.path.startswith("/api/") or request.path in ("/", "/login"):
        resp.headers.setdefault("Cache-Control", "no-store")
    return resp

