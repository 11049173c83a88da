"""Named sources: the homelab repository plus the git work trees ``AI_SOURCES`` names.

``AI_SOURCES`` is a space-separated list of ``NAME=TYPE:PATH``
(``vault=notes:/srv/vault roam=notes:/srv/org chats=chats:/srv/chats``). TYPE says how a
source's tracked files are read:

* ``repo``: a homelab repository, with the ``AI_GLOBS_*`` kinds (header, readme, ...).
* ``notes``: an Obsidian vault or org-roam folder: ``*.md`` are kind ``note``, ``*.org``
  kind ``org``.
* ``chats``: chat exports: WhatsApp text exports (``*.txt``) and JSON exports (``*.json``),
  kind ``chat``.

The repository ``AI_REPO_ROOT`` is always the source ``repo`` (type ``repo``). Every source is
indexed only from its own ``git ls-files``, like the repository. In the index, a path of the
default source is stored as git lists it; any other source's path is ``NAME:path``
(``vault:Backups/restic.md``), which keeps paths unique across sources and makes citations read
``source:path › heading``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable, NamedTuple

DEFAULT_SOURCE = "repo"
SOURCE_TYPES = ("repo", "notes", "chats")
NOTE_KINDS = ("note", "org")
CHAT_KINDS = ("chat",)
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_SUFFIX_KINDS = {"notes": {".md": "note", ".markdown": "note", ".org": "org"},
                 "chats": {".txt": "chat", ".json": "chat"}}


class SourceSpec(NamedTuple):
    """One source: ``name`` (``repo``, ``vault``), ``type`` (repo|notes|chats), ``root``."""

    name: str
    type: str
    root: Path

    @property
    def is_default(self) -> bool:
        """The homelab repository itself (its paths are stored without a prefix)."""
        return self.name == DEFAULT_SOURCE

    def stored_path(self, path: str) -> str:
        """The index path of a path git listed in this source (``vault:notes/x.md``)."""
        return path if self.is_default else f"{self.name}:{path}"

    def kind_of(self, path: str, matcher) -> str | None:
        """The document kind of a tracked path; None when this source does not read it.

        ``matcher``: the repository's ``sources.KindMatcher`` (used by ``repo`` sources).
        """
        if self.type == "repo":
            return matcher.kind_of(path)
        return _SUFFIX_KINDS[self.type].get(os.path.splitext(path)[1].lower())


def parse_sources(items: Iterable[str]) -> list[SourceSpec]:
    """The extra sources of ``AI_SOURCES`` (already split on spaces), in order.

    Raises:
        ValueError: an item not of the form ``NAME=TYPE:PATH``, an unknown TYPE, a name that is
            not lower-case letters, digits, ``-``/``_`` (≤ 32), the reserved name ``repo``, a
            repeated name, or a relative PATH. The message names the item.
    """
    out: list[SourceSpec] = []
    for item in items:
        name, eq, rest = item.partition("=")
        kind, colon, path = rest.partition(":")
        if not (eq and colon and path):
            raise ValueError(f"AI_SOURCES: {item!r} is not NAME=TYPE:PATH")
        if not _NAME.match(name):
            raise ValueError(f"AI_SOURCES: {item!r}: the name must be lower-case letters, digits,"
                             f" '-' or '_' (at most 32, starting with a letter)")
        if name == DEFAULT_SOURCE:
            raise ValueError(f"AI_SOURCES: {item!r}: {DEFAULT_SOURCE!r} is the homelab "
                             f"repository (AI_REPO_ROOT); name this source otherwise")
        if kind not in SOURCE_TYPES:
            raise ValueError(f"AI_SOURCES: {item!r}: TYPE must be one of "
                             f"{', '.join(SOURCE_TYPES)}")
        root = Path(os.path.expanduser(path))
        if not root.is_absolute():
            raise ValueError(f"AI_SOURCES: {item!r}: PATH must be absolute")
        if any(s.name == name for s in out):
            raise ValueError(f"AI_SOURCES: the name {name!r} is used twice")
        out.append(SourceSpec(name, kind, root))
    return out


def all_sources(settings) -> list[SourceSpec]:
    """The default source ``repo`` (``AI_REPO_ROOT``) followed by ``AI_SOURCES``."""
    extra = parse_sources(settings.ai_sources or ())
    return [SourceSpec(DEFAULT_SOURCE, "repo", Path(settings.ai_repo_root)), *extra]


def names_of_types(settings, types: Iterable[str]) -> tuple[str, ...]:
    """The names of the sources whose type is one of ``types`` (``("notes", "chats")``)."""
    wanted = set(types)
    return tuple(s.name for s in all_sources(settings) if s.type in wanted)


def source_of_path(path: str, names: Iterable[str]) -> str:
    """The source name of a stored path: the prefix before ``:`` when it names a configured
    source, else the default source."""
    head, sep, _ = path.partition(":")
    return head if sep and head in set(names) else DEFAULT_SOURCE


def file_stem(path: str) -> str:
    """A stored path's file name without its extension or source prefix
    (``vault:Plain note.md`` -> ``Plain note``)."""
    base = os.path.basename(path)
    head, sep, rest = base.partition(":")
    if sep and "/" not in path.split(":", 1)[0]:
        base = rest if "/" not in path else base
    return os.path.splitext(base)[0]
