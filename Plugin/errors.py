"""The dock's JSON errors: one shape, one handler.

Every ``/api`` error is ``{"error": message, ...}`` with its HTTP status, whether a view
returns it (``api_error``) or Flask raises it (``register``'s one handler).
"""

from __future__ import annotations

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import HTTPException


def api_error(status: int, message: str, **extra) -> Response:
    """A JSON error response ``{"error": message, **extra}`` with ``status``."""
    resp = jsonify({"error": message, **extra})
    resp.status_code = status
    return resp


def json_object() -> dict | Response:
    """The request's JSON object body, or a 400 response when it is not one."""
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        return api_error(400, "expected a JSON object body")
    return body


def disabled_gate() -> Response | None:
    """A before-request hook: 503 for ``/api`` routes while AI_ENABLED=false."""
    from varaverk_dock.state import dock_state
    if request.path.startswith("/api/") and not dock_state().settings.ai_enabled:
        return api_error(503, "Varaverk is disabled on this host (AI_ENABLED=false)")
    return None


def register(app: Flask) -> None:
    """Install the one HTTP error handler: JSON under ``/api``, Flask's page elsewhere."""

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException):
        if request.path.startswith("/api/"):
            return api_error(exc.code or 500, exc.description or exc.name)
        return exc
