"""The index's status and the token totals, for the page's side panel.

    GET    /api/status           the index's status (files, chunks, model, last build, behind HEAD)
    GET    /api/tokens           token totals today / last 7 days / all time per host
"""

from __future__ import annotations

import logging
import subprocess

from flask import Blueprint, jsonify

from varaverk.config import Settings
from varaverk_dock.errors import api_error
from varaverk_dock.state import dock_state

log = logging.getLogger("varaverk.dock")

bp = Blueprint("status", __name__)


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
    settings = dock_state().settings
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
        "sources": _sources(settings, raw.get("sources") or {}),
    }
    return jsonify(info)


def _sources(settings: Settings, stored: dict) -> list[dict]:
    """One row per configured source: ``{"name", "type", "files", "chunks", "skipped"}``."""
    from varaverk.named_sources import all_sources
    try:
        specs = all_sources(settings)
    except ValueError:  # load_settings validated AI_SOURCES; a hand-made Settings may not
        specs = []
    empty = {"files": 0, "chunks": 0, "skipped": 0}
    return [{"name": s.name, "type": s.type, **{**empty, **stored.get(s.name, {})}}
            for s in specs]


@bp.get("/api/tokens")
def tokens():
    """``GET /api/tokens``: ledger token totals (today, last 7 days, all time) per host;
    500 when the totals cannot be computed."""
    settings = dock_state().settings
    try:
        from varaverk.ledger import fleet_totals
    except ImportError:
        return api_error(501, "the ledger module is not installed")
    try:
        return jsonify(fleet_totals(settings).as_dict())
    except ValueError as exc:
        return api_error(500, f"token totals unavailable: {exc}")

