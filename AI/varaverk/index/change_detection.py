"""Change detection: which tracked paths changed since the index stored them, by ``lstat``
only, and whether a refresh has any work at all.

As git does: a document whose stored size, mtime, ctime, inode, device (``stat_key``) and
kind still match is unchanged without being read, unless it is racy (git's rule, ``racy``);
any difference re-hashes it, and an equal hash costs no embedding. ctime is what catches an
edit whose mtime was put back (``touch -r``, ``cp -p``): no user tool can set it; the inode
catches a file replaced by a rename or a restore. A change of the chunkers
(``varaverk.documents.stamp.chunker_stamp``), of the globs' verdicts, of a source's HEAD or of
the embedder the settings name also makes work.
"""

from __future__ import annotations

from pathlib import Path

from varaverk.index.classify import VERDICTS_META, Entry, Listed, heads_moved
from varaverk.index.fingerprint import RACY_SLACK_NS
from varaverk.index.store.compatibility import (CHUNK_CONTEXT_META, chunk_context,
                                                names_other_embedder)
from varaverk.index.store.records import UNKNOWN_STAT, FileState, stat_key


# Git's racy-timestamp rule: a file whose stored mtime is not older than the start of the run
# that stored it may have been written again within the same clock tick, or had its mtime put
# back (touch -r, sync tools, a checkout), so its stat proves nothing and it is re-hashed. The
# slack (RACY_SLACK_NS) covers file times coming from a coarse kernel clock.


def racy_since(meta: dict) -> int | None:
    """Stored mtimes at or after this (ns) are racy; None for an index built before the rule."""
    started = meta.get("scan_started_ns", "")
    return int(started) - RACY_SLACK_NS if started.isdigit() else None


def racy(stored: FileState, since: int | None) -> bool:
    """Whether a stored row's stat proves nothing (its mtime is at or after ``since``)."""
    return since is not None and stored.mtime_ns >= since


def _same_bytes(root: Path, entry: Entry, stored: FileState) -> bool:
    """A racy file's content still hashes to the stored sha256 (read, nothing written)."""
    # Here, not at the top: the reading side (guard, secret masks) costs a no-op run that
    # finds no racy file more than its comparisons (tests/index/test_start_up.py).
    from varaverk.index.prepare import read_document, sha256

    data, _ = read_document(root, entry)
    return data is not None and sha256(data) == stored.sha256


def stat_unchanged(entry: Entry, stored: FileState | None) -> bool:
    """A readable document whose stored stat (``stat_key``: size, mtime, ctime, inode,
    device) and kind match (no read needed unless it is racy: ``racy``)."""
    if stored is None or entry.st is None:
        return False
    return (stored.status != "partial" and stored.kind == entry.kind
            and stored.stat_key() == stat_key(entry.st))


def skip_unchanged(entry: Entry, stored: FileState | None) -> bool:
    """A path skipped before the read (not a doc, submodule, symlink...) stored as such; a
    sniffed script candidate (``entry.st`` set) also by its stat (``stat_key``)."""
    return stored is not None and stored.status == "skipped" and stored.reason == entry.reason \
        and stored.kind == entry.kind and skip_stat(entry) == stored.stat_key()


def skip_stat(entry: Entry) -> tuple[int, int, int, int, int]:
    """The stat a skip row stores (``stat_key``): all -1 unless the path was sniffed
    (``_sniffed``)."""
    return stat_key(entry.st) if entry.st is not None else UNKNOWN_STAT


def differences(entries: list[Entry], states: dict, root: Path, meta: dict
                ) -> tuple[list[str], list[str], list[str]]:
    """``(changed, added, removed)`` paths between the classified tracked paths and the stored
    rows, by ``lstat`` only; only a racy file (``racy``) whose stat matches is read and
    hashed."""
    changed, added = [], []
    since = racy_since(meta)
    for entry in entries:
        stored = states.get(entry.path)
        if stored is None:
            added.append(entry.path)
        elif entry.reason:
            if not skip_unchanged(entry, stored):
                changed.append(entry.path)
        elif not stat_unchanged(entry, stored) or (
                racy(stored, since) and not _same_bytes(root, entry, stored)):
            changed.append(entry.path)
    current = {e.path for e in entries}
    return changed, added, sorted(p for p in states if p not in current)


def configured_embedder(settings) -> tuple[str, str]:
    """``(backend, model)``: the embedder the settings name, as written (for
    ``names_other_embedder``)."""
    return settings.ai_embed_backend, settings.ai_embed_model.strip()


def needs_work(settings, listing: Listed, entries: list[Entry], states: dict, meta: dict,
               stamp: str) -> bool:
    """Whether a refresh has anything to do: a HEAD moved, the chunkers (``stamp``, see
    ``varaverk.documents.stamp.chunker_stamp``) or the globs changed, the settings name another
    embedder, or a path changed, was added or removed (``differences``)."""
    if heads_moved(listing, meta):
        return True
    if states and meta.get("chunker") != stamp:
        return True
    if states and meta.get(VERDICTS_META) != listing.glob_verdicts:
        return True  # new globs (or candidates): decided afresh, then recorded by the write
    if names_other_embedder(meta, *configured_embedder(settings)):
        return True
    if meta.get("embed_backend") and \
            meta.get(CHUNK_CONTEXT_META, "off") != chunk_context(settings):
        return True  # AI_CONTEXTUAL_CHUNKS switched: the locked pass refuses it
    return any(differences(entries, states, listing.root, meta))
