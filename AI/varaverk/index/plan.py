"""``plan`` (``ai-index --dry-run``): what an index run would store, per kind and file, without
contacting any server or writing anything."""

from __future__ import annotations

from typing import Any, Callable

from varaverk.documents import tracked_files
from varaverk.index.classify import list_all
from varaverk.index.prepare import LinkTitles, guarded_decode_and_chunk, read_document


def plan(settings, count_tokens: Callable[[str], int] | None = None, max_tokens: int = 256
         ) -> dict[str, Any]:
    """What an index run would index, without contacting any server or writing anything.

    Reads and chunks every tracked document (nothing else), exactly as ``refresh`` would.

    Args:
        settings: ``Settings``.
        count_tokens, max_tokens: the embedder's token counter and input budget (the local
            tokenizer works offline; remote backends count characters).

    Returns:
        ``{"repo_root", "head", "tracked" (every source's), "sources" (names), "kinds":
        {kind: {"files", "chunks"}},
        "files": [{"path", "kind", "chunks", "encoding"}], "skipped": [{"path", "kind",
        "reason"}], "chunks"}``.
    """
    listing, entries = list_all(settings, tracked_files.KindMatcher.from_settings(settings))
    kinds: dict[str, dict[str, int]] = {k: {"files": 0, "chunks": 0} for k in tracked_files.KINDS}
    files, skipped = [], []
    links = LinkTitles(entries, listing.root)
    for entry in entries:
        data, reason = (None, entry.reason) if entry.reason else read_document(listing.root, entry)
        if data is not None:
            decoded, chunks, reason, _ = guarded_decode_and_chunk(
                entry, data, count_tokens, max_tokens, links.getter(entry))
        if reason:
            skipped.append({"path": entry.path, "kind": entry.kind, "reason": reason})
            continue
        kinds.setdefault(entry.kind, {"files": 0, "chunks": 0})
        kinds[entry.kind]["files"] += 1
        kinds[entry.kind]["chunks"] += len(chunks)
        files.append({"path": entry.path, "kind": entry.kind, "chunks": len(chunks),
                      "encoding": decoded.encoding})
    return {"repo_root": str(listing.root), "head": listing.head, "tracked": len(listing.entries),
            "sources": [spec.name for spec in listing.specs],
            "kinds": kinds, "files": files, "skipped": skipped,
            "chunks": sum(k["chunks"] for k in kinds.values())}
