"""The fleet endpoint: this host's own token ledger, for partners running ``ai-token-sync``.

``GET /api/fleet/ledger`` returns the ledger file at ``settings.token_db_path`` as
``text/plain; charset=utf-8``, byte for byte, and nothing else: never a cached partner ledger,
never any other file. Partners pull; nothing is ever pushed to this host.

Access: the caller presents the fleet read token ``AI_FLEET_TOKEN`` as
``Authorization: Bearer <token>`` (or ``X-Varaverk-Fleet-Token``), compared in constant time.
With ``AI_FLEET_TOKEN`` unset the endpoint answers 404: fleet sharing is off by default. This
route does its own authentication, so the dock's browser token check should let
``FLEET_PREFIX`` through (a partner holds the fleet token, not the dock token).

Conditional requests: the response carries an ``ETag`` (inode, size and mtime of the file) and
``Last-Modified``; ``If-None-Match`` / ``If-Modified-Since`` that still match are answered
``304 Not Modified`` from one ``stat``, without reading the file. A host with no ledger yet
answers 200 with an empty body (it has simply answered nothing yet).

The dock registers ``bp`` in ``create_app``; the settings are the dock's own
(``app.extensions["varaverk_dock"].settings``).
"""

from __future__ import annotations

import datetime as dt
import hmac
import os

from flask import Blueprint, Response, abort, request

from varaverk.ledger.storage import read_bytes_locked
from varaverk_dock.state import dock_state

FLEET_PREFIX = "/api/fleet/"
LEDGER_PATH = FLEET_PREFIX + "ledger"
TOKEN_HEADER = "X-Varaverk-Fleet-Token"

bp = Blueprint("fleet", __name__)


def etag_for(stat: os.stat_result) -> str:
    """A strong validator for one version of the ledger: inode, size and mtime in ns.

    The inode changes when a prune replaces the file, the size on every append.
    """
    return f"{stat.st_ino:x}-{stat.st_size:x}-{stat.st_mtime_ns:x}"


def _presented_token() -> str:
    auth = request.headers.get("Authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.headers.get(TOKEN_HEADER, "")


def _authorised(expected: str) -> bool:
    presented = _presented_token()
    # compare_digest on bytes: constant time, and safe for non-ASCII input.
    return bool(presented) and hmac.compare_digest(presented.encode("utf-8"),
                                                   expected.encode("utf-8"))


def _not_modified(stat: os.stat_result) -> bool:
    if request.if_none_match:
        # If-None-Match wins over If-Modified-Since when both are sent (RFC 9110 13.2.2).
        return request.if_none_match.contains(etag_for(stat))
    since = request.if_modified_since
    if since is not None:
        modified = dt.datetime.fromtimestamp(int(stat.st_mtime), dt.timezone.utc)
        return modified <= since
    return False


def _conditional_headers(response: Response, stat: os.stat_result) -> Response:
    response.set_etag(etag_for(stat))
    response.last_modified = dt.datetime.fromtimestamp(stat.st_mtime, dt.timezone.utc)
    response.headers["Cache-Control"] = "no-cache"
    return response


@bp.get(LEDGER_PATH)
def ledger():
    """This host's ledger as plain text, 304 when the partner's copy is current.

    Statuses: 200 (body: the ledger, possibly empty), 304 (unchanged), 401 (missing or wrong
    fleet token), 404 (fleet sharing off: ``AI_FLEET_TOKEN`` unset).
    """
    settings = dock_state().settings
    if not settings.ai_fleet_token:
        abort(404)
    if not _authorised(settings.ai_fleet_token):
        return Response("fleet token required\n", status=401, mimetype="text/plain",
                        headers={"WWW-Authenticate": 'Bearer realm="varaverk-fleet"'})
    path = settings.token_db_path
    try:
        stat = os.stat(path)
        if _not_modified(stat):
            return _conditional_headers(Response(status=304), stat)
        data, stat = read_bytes_locked(path)
    except FileNotFoundError:
        return Response(b"", status=200, content_type="text/plain; charset=utf-8",
                        headers={"Cache-Control": "no-cache"})
    response = Response(data, status=200, content_type="text/plain; charset=utf-8")
    return _conditional_headers(response, stat)
