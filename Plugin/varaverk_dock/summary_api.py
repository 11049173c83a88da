"""A document's stored summary, for the "summary" entry under each source of an answer.

    GET    /api/summary                  {"enabled": AI_SUMMARIES is on}
    GET    /api/summary?path=PATH        the summary of one indexed file, with its model and date
"""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from varaverk.index.store.errors import IndexCorrupt, IndexMissing
from varaverk.index.store.index import Index
from varaverk.summaries.summary_pass import summary_model
from varaverk_dock.errors import api_error
from varaverk_dock.state import dock_state

bp = Blueprint("summary", __name__)


@bp.get("/api/summary")
def document_summary():
    """``GET /api/summary``: without ``path`` ``{"enabled"}``; with it ``{"path", "model",
    "made_at", "stale", "summary"}``, 404 when the file has none (or summaries are off), 503
    without an index."""
    settings = dock_state().settings
    path = (request.args.get("path") or "").strip()
    if not path:
        return jsonify({"enabled": settings.ai_summaries != "off"})
    if settings.ai_summaries == "off":
        return api_error(404, "document summaries are off (AI_SUMMARIES)")
    try:
        with Index.open(settings.index_path, readonly=True) as idx:
            found = idx.summary(path)
    except (IndexMissing, IndexCorrupt) as exc:
        return api_error(503, str(exc))
    if found is None:
        return api_error(404, f"no summary of {path} yet (ai-index --summaries makes them)")
    return jsonify({"path": found.path, "model": found.model, "made_at": found.made_at,
                    "stale": found.stale_content or found.model != summary_model(settings),
                    "summary": found.text})
