"""``status`` (``ai-index --status``): what the index holds and whether it is behind the
repository, read-only, by ``lstat`` only."""

from __future__ import annotations

from typing import Any

from varaverk.documents import tracked_files
from varaverk.index.change_detection import configured_embedder, differences
from varaverk.index.classify import Entry, Listed, head_key, heads_moved, list_all
from varaverk.index.store.compatibility import names_other_embedder
from varaverk.index.store.index import Index
from varaverk.named_sources import DEFAULT_SOURCE, source_of_path


def status(settings) -> dict[str, Any]:
    """The index's contents and whether it is behind the repository (``ai-index --status``).

    Opens the index read-only and compares with the repository by ``lstat`` only (only racy
    files are read and hashed; nothing is written, no server contacted).

    Returns:
        ``Index.status()`` plus ``"sources"`` (a list, one row per configured source, see
        ``_source_status``), ``"repository": {"root", "head", "tracked"}`` and
        ``"behind": {"head_moved", "stored_head", "changed", "added", "removed",
        "embedder_changed", "configured_embedder", "behind"}`` (path lists; embedder_changed:
        the settings name another embedder than built the index, so ``--force`` is needed).

    Raises:
        IndexMissing: no index yet. SourcesError: the repository cannot be listed.
    """
    with Index.open(settings.index_path, readonly=True) as idx:
        info = idx.status()
        states = idx.file_states()
    meta = info["meta"]
    matcher = tracked_files.KindMatcher.from_settings(settings)
    listing, entries = list_all(settings, matcher, states, meta)
    changed, added, removed = differences(entries, states, listing.root, meta)
    head_moved = heads_moved(listing, meta)
    # The settings name another embedder than the one that built the index: a refresh would
    # be refused until --force.
    embedder_changed = names_other_embedder(meta, *configured_embedder(settings))
    info["repository"] = {"root": str(listing.root), "head": listing.head,
                          "tracked": sum(1 for e in entries if e.source == DEFAULT_SOURCE)}
    info["behind"] = {"head_moved": head_moved, "stored_head": meta.get("head") or None,
                      "changed": changed, "added": added, "removed": removed,
                      "embedder_changed": embedder_changed,
                      "configured_embedder": "/".join(
                          p for p in configured_embedder(settings) if p),
                      "behind": bool(head_moved or changed or added or removed
                                     or embedder_changed)}
    info["sources"] = _source_status(listing, entries, info.get("sources") or {}, meta,
                                     (changed, added, removed))
    return info


def _source_status(listing: Listed, entries: list[Entry], stored: dict, meta: dict,
                   paths: tuple[list[str], list[str], list[str]]) -> list[dict]:
    """One row per configured source: ``{"name", "type", "root", "head", "tracked", "files",
    "skipped", "chunks", "behind"}`` (counts from the index; ``behind``: HEAD moved or a path
    of this source changed, was added or removed: ``paths``, as ``differences`` gives them)."""
    moved = {p for group in paths for p in group}
    rows = []
    for spec in listing.specs:
        mine = [e for e in entries if e.source == spec.name]
        counts = stored.get(spec.name, {"files": 0, "skipped": 0, "chunks": 0})
        behind = listing.heads[spec.name] != meta.get(head_key(spec.name), "") or any(
            e.path in moved for e in mine) or any(
            _stored_source(p, listing) == spec.name for p in paths[2])
        rows.append({"name": spec.name, "type": spec.type, "root": listing.roots[spec.name],
                     "head": listing.heads[spec.name] or None, "tracked": len(mine), **counts,
                     "behind": bool(behind)})
    return rows


def _stored_source(path: str, listing: Listed) -> str:
    return source_of_path(path, [s.name for s in listing.specs])
