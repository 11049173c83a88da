"""HTTP routes of the capabilities: the troubleshoot log picker and bug filing.

Routes (the dock registers ``bp`` in ``create_app``; its before-request guard already checks
the Host header, the token and same-origin for POSTs):

``GET /api/logs?profile=troubleshoot``
    ``{"dirs": [...], "logs": [{"path", "name", "size", "mtime"}]}``: readable logs under
    ``AI_TROUBLESHOOT_LOG_DIRS``, newest first, for the log picker. 403 when the profile
    does not hold ``scoped_log``.
``POST /api/bug-reports/draft``
    Body ``{"profile": "troubleshoot", "title", "what_happened", "log_path"?}``: a draft
    (with the open log's excerpt and versions) for the user to review. Nothing is written.
``POST /api/bug-reports``
    Body ``{"profile": "troubleshoot", "draft": {...}, "confirm": true}``: writes the draft
    to ``AI_DATA_DIR/bug_reports/`` and answers 201 ``{"file"}``. Without ``"confirm": true``
    it answers 400 and writes nothing. 403 when the profile does not hold ``bug_filing``.

Every route answers 503 while ``AI_ENABLED=false``. Settings are the dock's own
(``varaverk_dock.state.dock_state()``).
"""

from __future__ import annotations

import logging

from flask import Blueprint, jsonify, request

from varaverk.answering.capabilities import (BugReportInvalid, CapabilityDenied, LogAccessDenied,
                                             LogNotFound, draft_bug_report, list_logs, read_log,
                                             save_bug_report)
from varaverk.answering.capabilities.scoped_log import log_dirs
from varaverk.answering.profiles import UnknownProfile, get_profile
from varaverk_dock.errors import BadBody, api_error, parse_json_object
from varaverk_dock.state import dock_state

log = logging.getLogger("varaverk.answering.capabilities")

bp = Blueprint("capabilities", __name__)




def _settings():
    return dock_state().settings


def _profile(name):
    try:
        return get_profile(name if isinstance(name, str) and name else "troubleshoot")
    except UnknownProfile as exc:
        raise ValueError(str(exc).strip('"')) from None


@bp.errorhandler(CapabilityDenied)
def _denied(exc):
    return api_error(403, str(exc))


@bp.get("/api/logs")
def logs():
    """``GET /api/logs``: the picker's folders and logs; 400 for an unknown profile, 403
    (CapabilityDenied) when the profile does not hold ``scoped_log``."""
    try:
        profile = _profile(request.args.get("profile"))
    except ValueError as exc:
        return api_error(400, str(exc))
    settings = _settings()
    return jsonify({"dirs": [str(d) for d in log_dirs(settings)],
                    "logs": list_logs(profile, settings)})


class _BadRequest(ValueError):
    """A malformed request body; answered 400 with its message."""


@bp.errorhandler(_BadRequest)
def _bad_request(exc):
    return api_error(400, str(exc))


def _body_and_profile() -> tuple[dict, object]:
    """The JSON object body and the profile it names; raises _BadRequest for either."""
    try:
        body = parse_json_object()
    except BadBody as exc:
        raise _BadRequest(str(exc)) from None
    try:
        return body, _profile(body.get("profile"))
    except ValueError as exc:
        raise _BadRequest(str(exc)) from None


@bp.post("/api/bug-reports/draft")
def bug_report_draft():
    """``POST /api/bug-reports/draft``: ``{"draft"}`` with secrets scrubbed, nothing written.

    400 for a malformed body or profile, 403/404 when ``log_path`` may not be read or does not
    exist, 403 when the profile does not hold ``bug_filing``.
    """
    body, profile = _body_and_profile()
    title, what = body.get("title", ""), body.get("what_happened", "")
    if not isinstance(title, str) or not isinstance(what, str):
        return api_error(400, "title and what_happened must be strings")
    settings = _settings()
    excerpt_text, source = "", None
    log_path = body.get("log_path")
    if log_path:
        if not isinstance(log_path, str):
            return api_error(400, "log_path must be a string")
        try:
            excerpts = read_log(profile, settings, log_path)
        except (LogAccessDenied, LogNotFound) as exc:
            return api_error(403 if isinstance(exc, LogAccessDenied) else 404, str(exc))
        main = excerpts[0]
        source = main.label
        excerpt_text = "\n".join(f"{n}: {t}" for n, t in
                                 zip(range(main.first_line, main.last_line + 1), main.lines))
    draft = draft_bug_report(profile, settings, title=title[:200], what_happened=what[:20_000],
                             log_excerpt=excerpt_text, log_source=source)
    return jsonify({"draft": draft})


@bp.post("/api/bug-reports")
def bug_report_save():
    """``POST /api/bug-reports``: writes a confirmed draft, 201 ``{"file"}`` (the file name).

    400 without ``"confirm": true`` or for an invalid draft, 403 when the profile does not hold
    ``bug_filing``.
    """
    body, profile = _body_and_profile()
    if body.get("confirm") is not True:
        return api_error(400, 'not written: the user must confirm ("confirm": true)')
    try:
        path = save_bug_report(_settings(), body.get("draft"), True, profile=profile)
    except BugReportInvalid as exc:
        return api_error(400, f"invalid draft: {exc}")
    resp = jsonify({"file": path.name})
    resp.status_code = 201
    return resp
