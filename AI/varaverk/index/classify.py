"""Classifying tracked paths: every source's ``git ls-files``, each path's kind and disk check,
and the globs' verdicts kept in the index so that a no-op run compiles no glob.

Shared by refresh, plan and status. A repository path's kind is its globs' verdict
(``varaverk.documents.tracked_files.KindMatcher``), else, for a script candidate no glob names, its
shebang. The verdicts on script candidates are recorded in meta (``VERDICTS_META``) under a
fingerprint of the globs and of the code that applies them; while the fingerprint is the
same, a path with a stored row takes its kind from the index (``_kind``).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

from varaverk.documents import tracked_files
from varaverk.index.store.records import FileState, stat_key
from varaverk.named_sources import DEFAULT_SOURCE, SourceSpec, all_sources


class Entry(NamedTuple):
    """One tracked path of one source, classified: its kind, why it is skipped, its lstat."""

    path: str            # storable path (printable when the name is not valid UTF-8)
    kind: str            # "" when not a documentation kind
    reason: str          # skip reason; "" for a readable document
    st: tracked_files.FileStat | None
    source: str = DEFAULT_SOURCE   # the named source it was listed in
    rel: str = ""                  # the path inside that source ("": same as ``path``)
    root: Path | None = None       # that source's work tree (None: the repository's)


class Listed(NamedTuple):
    """Every source's ``git ls-files``, as one listing.

    ``root``/``head`` are the default source's (the repository), ``entries`` every source's
    tracked paths (for counts), ``heads`` each source's HEAD by name, ``specs`` the sources,
    ``glob_verdicts`` the globs' verdicts to record (meta ``VERDICTS_META``, see ``_kind``),
    ``git_state`` the repository's ``tracked_files.Listing.git_state``.
    """

    root: Path
    head: str | None
    entries: list
    heads: dict[str, str]
    roots: dict[str, str]
    specs: list[SourceSpec]
    glob_verdicts: str
    git_state: str = ""


def head_key(name: str) -> str:
    """The meta key of a source's HEAD (``head`` for the repository, as before sources)."""
    return "head" if name == DEFAULT_SOURCE else f"head:{name}"


def heads_moved(listed: Listed, meta: dict) -> bool:
    """Whether any source's HEAD differs from the one the index recorded."""
    return any(head != meta.get(head_key(name), "") for name, head in listed.heads.items())


# The meta entry keeping, beside the fingerprint of the globs (``_globs_fingerprint``), the
# globs' verdicts on the script candidates (``_kind``): ``repr((fingerprint, {path: (kind,
# excluded)}))``.
VERDICTS_META = "glob_verdicts"


def _globs_fingerprint(settings, specs: list[SourceSpec]) -> str:
    """The ``AI_GLOBS_*`` settings, the sources' names and types, and the code that applies
    them (``tracked_files.classifier_stamp``): while these are the same, so is every glob
    verdict."""
    globs = {kind: tuple(getattr(settings, f"ai_globs_{kind}")) for kind in tracked_files.KINDS}
    return repr((tracked_files.classifier_stamp(), globs, tuple(settings.ai_globs_exclude),
                 tuple(settings.ai_globs_skip),
                 [(spec.name, spec.type) for spec in specs]))


def _known_verdicts(meta: dict | None, fingerprint: str) -> dict | None:
    """The recorded verdicts when they were made under ``fingerprint``, else None."""
    recorded = (meta or {}).get(VERDICTS_META)
    if not recorded:
        return None
    try:
        made_under, verdicts = ast.literal_eval(recorded)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if made_under != fingerprint or not isinstance(verdicts, dict) or not all(
            isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str)
            for v in verdicts.values()):
        return None
    return verdicts


def list_all(settings, matcher: tracked_files.KindMatcher, states: dict | None = None,
             meta: dict | None = None) -> tuple[Listed, list[Entry]]:
    """List and classify every source (the repository first, then ``AI_SOURCES``);
    ``states`` (the stored file rows) as ``_classify`` takes them; ``meta``: the stored meta,
    whose recorded glob verdicts (``_kind``) spare a no-op run compiling any glob.

    Raises SourcesError when one cannot be listed (nothing is written then, so a source
    that is briefly unmounted never loses its chunks).
    """
    specs = all_sources(settings)
    fingerprint = _globs_fingerprint(settings, specs)
    known = _known_verdicts(meta, fingerprint) if states is not None else None
    verdicts: dict[str, tuple[str, bool]] = {}
    entries: list[Entry] = []
    all_tracked: list = []
    heads, roots = {}, {}
    repo = None
    for spec in specs:
        listing = tracked_files.list_tracked(spec.root)
        repo = repo or listing
        all_tracked.extend(listing.entries)
        heads[spec.name], roots[spec.name] = listing.head or "", str(listing.root)
        entries.extend(_classify(listing, matcher, spec, states, (known, verdicts)))
    return Listed(repo.root, repo.head, all_tracked, heads, roots, specs,
                  repr((fingerprint, dict(sorted(verdicts.items())))), repo.git_state), entries


def _classify(listing: tracked_files.Listing, matcher: tracked_files.KindMatcher,
              spec: SourceSpec, states: dict | None,
              verdicts: tuple[dict | None, dict]) -> list[Entry]:
    """Kind and disk check of every tracked path of one source (the kind: ``_kind``)."""
    folders: dict[str, str] = {}  # each folder is checked for links once (lstat_entry)
    entries = []
    for tracked_path in listing.entries:
        extra = (spec.name, tracked_path.path, listing.root)
        if not tracked_files.is_valid_name(tracked_path.path):
            shown = tracked_files.printable_name(tracked_path.path)
            entries.append(Entry(spec.stored_path(shown), "", tracked_files.REASON_BAD_NAME, None,
                                 *extra))
            continue
        path = spec.stored_path(tracked_path.path)
        kind, sniff_st = _kind(listing.root, tracked_path, spec, matcher,
                               states.get(path) if states else None, verdicts, folders)
        if tracked_path.mode == tracked_files.GITLINK_MODE:  # a folder of another repository
            entries.append(Entry(path, kind, tracked_files.REASON_SUBMODULE, None, *extra))
            continue
        if not kind:
            entries.append(Entry(path, "", tracked_files.REASON_NOT_DOC, sniff_st, *extra))
            continue
        # A script known by its shebang was lstat-checked by the sniff (``_sniffed``).
        st, reason = (sniff_st, "") if sniff_st is not None else \
            tracked_files.lstat_entry(listing.root, tracked_path, folders)
        entries.append(Entry(path, kind, reason, st, *extra))
    return entries


def _kind(root: Path, tracked_path: tracked_files.TrackedPath, spec: SourceSpec,
          matcher: tracked_files.KindMatcher, stored: FileState | None,
          verdicts: tuple[dict | None, dict], folders: dict[str, str]
          ) -> tuple[str, tracked_files.FileStat | None]:
    """One tracked path's kind ("" for none) and the lstat of a sniffed script (``_sniffed``).

    A repository path's kind is its globs' verdict (``matcher``: kind, or excluded), else for
    a script candidate no glob names (``tracked_files.could_be_script``) its shebang. ``verdicts``
    = ``(known, found)``: the globs' verdicts on script candidates recorded by the last run
    under the same globs (None: none or other globs), and the dict this run's go into. A path
    with a stored row needs no glob then: a candidate's verdict is known, and any other path's
    stored kind is its verdict (only candidates are sniffed). So a no-op run compiles none.
    """
    if spec.type != "repo":
        return spec.kind_of(tracked_path.path, matcher) or "", None
    known, found = verdicts
    path = spec.stored_path(tracked_path.path)
    candidate = tracked_files.could_be_script(tracked_path)
    if known is not None and stored is not None and path in known:
        kind, excluded = known[path]
    elif known is not None and stored is not None and not candidate:
        kind, excluded = stored.kind, False  # never sniffed: as a glob left it
    else:
        name = tracked_path.path
        kind, excluded = matcher.kind_of(name) or "", matcher.excluded(name)
    if candidate:
        found[path] = (kind, excluded)
    if kind or excluded or not candidate:
        return kind, None
    return _sniffed(root, tracked_path, stored, folders)


def _sniffed(root: Path, tracked_path: tracked_files.TrackedPath, stored: FileState | None,
             folders: dict[str, str]) -> tuple[str, tracked_files.FileStat | None]:
    """``("header", st)`` for a script candidate (``tracked_files.could_be_script``, decided by
    ``_kind``) known by its shebang only, else ``("", st)``; ``st`` is the path's lstat (None
    when it cannot be read).

    The verdict ``stored`` by the last run stands while the file's stat does (``stat_key``), so a
    no-op run opens no file; a changed file is sniffed again, as it may have gained or lost
    its shebang. ``--force`` (no stored states) sniffs every candidate.
    """
    st, reason = tracked_files.lstat_entry(root, tracked_path, folders)
    if reason or st is None:
        return "", None
    if stored is not None and stored.stat_key() == stat_key(st):
        return ("header" if stored.kind == "header" else ""), st
    return tracked_files.shebang_kind(root, tracked_path, st) or "", st

