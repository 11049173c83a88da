"""The dock's pages: the chat page, the token login form, the health probe, the icon."""

from __future__ import annotations

import logging

from flask import Blueprint, Response, redirect, render_template, request, url_for

from varaverk.answering.profiles import DEFAULT_PROFILE, PROFILES
from varaverk_dock import security
from varaverk_dock.guard import login_response
from varaverk_dock.state import dock_state

log = logging.getLogger("varaverk.dock")

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
    settings = dock_state().settings
    if not settings.ai_enabled:
        return render_template("disabled.html", host=settings.ai_host_name)
    profiles = [{"name": p.name, "label": p.label} for p in PROFILES.values()]
    return render_template("index.html", profiles=profiles, default_profile=DEFAULT_PROFILE,
                           host=settings.ai_host_name)


@bp.get("/login")
def login():
    """``GET /login``: the token form; a redirect to ``/`` when no AI_DOCK_TOKEN is set."""
    if not dock_state().settings.ai_dock_token:
        return redirect(url_for("dock.index"))
    return render_template("login.html", error=None)


@bp.post("/login")
def login_post():
    """``POST /login``: sets the session cookie for the right token; 401 and the form again
    for a wrong one."""
    token = dock_state().settings.ai_dock_token
    if not token:
        return redirect(url_for("dock.index"))
    if security.token_ok(request.form.get("token", ""), token):
        return login_response(url_for("dock.index"))
    log.warning("refused a wrong token at /login from %s", request.remote_addr)
    return render_template("login.html", error="That token is not right."), 401

