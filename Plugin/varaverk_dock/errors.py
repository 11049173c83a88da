"""The dock's JSON errors: one shape, one handler.

Every ``/api`` error is ``{"error": message, ...}`` with its HTTP status, whether a view
returns it (``api_error``) or Flask raises it (``register``'s one handler).
"""

from __future__ import annotations

import json

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import HTTPException

from varaverk_dock.state import dock_state


def api_error(status: int, message: str, **extra) -> Response:
    """A JSON error response ``{"error": message, **extra}`` with ``status``."""
    resp = jsonify({"error": message, **extra})
    resp.status_code = status
    return resp


# No request of the dock nests deeper than a few levels (an import: body > messages > message).
MAX_JSON_DEPTH = 32


class BadBody(ValueError):
    """The request body is not a usable JSON object (the message says why)."""


def _check_values(obj: object) -> None:
    """Depth and Unicode of a decoded body, iteratively (no recursion to exhaust)."""
    stack = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise BadBody(f"JSON body nested deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(value, dict):
            stack.extend((k, depth) for k in value)
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
        elif isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise BadBody("JSON body holds a lone surrogate such as \\ud800 "
                              "(not valid Unicode)") from None


def parse_json_object() -> dict:
    """The request's JSON object body, checked; raises BadBody (a 400 to the client) for
    anything else: not JSON, not an object, nested too deeply, invalid Unicode."""
    if not request.is_json:
        raise BadBody("expected a JSON object body (Content-Type: application/json)")
    try:
        body = json.loads(request.get_data(cache=True))
    except RecursionError:
        raise BadBody(f"JSON body nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError:
        raise BadBody("expected a JSON object body") from None
    if not isinstance(body, dict):
        raise BadBody("expected a JSON object body")
    _check_values(body)
    return body


def json_object() -> dict | Response:
    """The request's JSON object body, or a 400 response saying why it is not usable."""
    try:
        return parse_json_object()
    except BadBody as exc:
        return api_error(400, str(exc))


def disabled_gate() -> Response | None:
    """A before-request hook: 503 for ``/api`` routes while AI_ENABLED=false."""
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
