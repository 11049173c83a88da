"""The index's status and the token totals, for the page's side panel.

    GET    /api/status           the index's status (files, chunks, model, last build, behind)
    GET    /api/tokens           token totals today / last 7 days / all time per host
"""

from __future__ import annotations

import logging

from flask import Blueprint, jsonify

from varaverk.errors import VaraverkError
from varaverk.index.progress_file import read_progress
from varaverk.index.status import status as index_status
from varaverk.index.store.errors import IndexMissing
from varaverk.ledger.fleet import fleet_totals
from varaverk_dock.errors import api_error
from varaverk_dock.state import dock_state

log = logging.getLogger("varaverk.dock")

bp = Blueprint("status", __name__)


@bp.get("/api/status")
def status():
    """``GET /api/status``: the index's files, chunks, model, last build and whether it is
    behind the repository, as ``ai-index --status`` computes it (``varaverk.index.status.status``:
    HEAD moved, files changed, added or removed, or another embedder configured);
    ``{"present": false, "message"}`` when there is no usable index. Both carry ``indexing``:
    a refresh running now (``varaverk.index.progress_file.read_progress``: phase, done, total,
    started, updated), or null."""
    settings = dock_state().settings
    indexing = read_progress(settings.index_path)
    try:
        raw = index_status(settings)
    except IndexMissing:
        return jsonify({"present": False, "indexing": indexing,
                        "message": "no index yet: run ai-index on this host"})
    except VaraverkError as exc:
        log.warning("status: %s", exc)
        return jsonify({"present": False, "indexing": indexing, "message": exc.one_line()})
    meta = raw.get("meta", {})
    behind = raw["behind"]
    info = {
        "present": True,
        "indexing": indexing,
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
        "head": meta.get("head") or None,
        "repo_head": raw["repository"]["head"],
        "behind": behind["behind"],
        "changed": {key: len(behind[key]) for key in ("changed", "added", "removed")},
        "embedder_changed": behind["embedder_changed"],
        "size_bytes": raw.get("size_bytes"),
        "sources": [{key: row[key] for key in ("name", "type", "files", "chunks", "skipped",
                                               "behind")} for row in raw.get("sources", [])],
    }
    return jsonify(info)


@bp.get("/api/tokens")
def tokens():
    """``GET /api/tokens``: ledger token totals (today, last 7 days, all time) per host;
    500 when the totals cannot be computed."""
    settings = dock_state().settings
    try:
        return jsonify(fleet_totals(settings).as_dict())
    except ValueError as exc:
        return api_error(500, f"token totals unavailable: {exc}")

