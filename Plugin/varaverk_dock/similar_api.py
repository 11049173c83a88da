"""Similar sections, for the "similar" link under each source of an answer.

    GET    /api/similar?target=PATH[#heading]&k=N   the nearest sections from other files
"""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from varaverk.index.store.errors import IndexCorrupt, IndexMissing
from varaverk.index.store.index import Index
from varaverk.retrieval.similar import SectionNotFound, similar
from varaverk_dock.errors import api_error
from varaverk_dock.state import dock_state

bp = Blueprint("similar", __name__)


@bp.get("/api/similar")
def similar_sections():
    """``GET /api/similar``: ``{"target", "results": [Hit.as_dict() + "citation"]}``; 400 for
    a missing target or k, 404 when the target is not indexed, 503 without an index."""
    target = (request.args.get("target") or "").strip()
    if not target:
        return api_error(400, "target: a stored path, optionally #heading, is required")
    try:
        k = int(request.args.get("k", "5"))
    except ValueError:
        return api_error(400, "k: a whole number is required")
    k = max(1, min(k, 20))
    settings = dock_state().settings
    try:
        with Index.open(settings.index_path, readonly=True) as idx:
            hits = similar(idx, target, k)
    except (IndexMissing, IndexCorrupt) as exc:
        return api_error(503, str(exc))
    except SectionNotFound as exc:
        return api_error(404, str(exc))
    return jsonify({"target": target, "results": [
        {**h.as_dict(), "citation": h.chunk.citation} for h in hits]})
