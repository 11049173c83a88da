"""Where a line stands in its document: a code block (fences, org ``#+begin_src``,
indented code), front matter or an org drawer (``meta``), or prose; its YAML/JSON parents'
key words; the key whose list it is an item of; a line's inline code spans.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from varaverk.masking.values import SECRETISH, key_role, key_words


# Kinds read as prose (script headers are comments): outside code blocks "key: several words"
# is a sentence, and a masked example-looking value inside a code block is a documentation
# example.
PROSE_KINDS = frozenset({"readme", "manual", "doc", "note", "org", "chat", "header"})
# A script's header is its help text, never where it reads its settings: an example-looking
# value anywhere in it is a documentation example (a README or a note may hold a real one).
EXPLAINING_KINDS = frozenset({"header"})


# -- where a line stands in its document --------------------------------------------------------

_FENCE = re.compile(r"^\s*(```|~~~)")
_ORG_BLOCK = re.compile(r"^\s*#\+(begin|end)_(src|example)\b", re.I)
DRAWER_LINE = re.compile(r"^\s*:[A-Za-z_][\w+-]*:(\s|$)")
_COMMENT = re.compile(r"\s*(?:#+|//+|;+)")
LEADING_KEY = re.compile(r"^(\s*)(?:-\s+)?[\"']?([^\"':\s{}\[\]][^\"':{}\[\]]{0,80}?)[\"']?"
                         r"\s*:(?:\s|$)")
# A YAML sequence entry's dash, and a line of a flow list's scalars (``"a",``, ``b, c``).
_ENTRY = re.compile(r"-(?:[ \t]+|$)")
FLOW_ITEMS = re.compile(r"""(?:(?:"(?:[^"\\\n]|\\.)*"|'[^'\n]*'|[^\s,"'\[\]{}#:][^,\[\]{}#]*?)"""
                        r"[ \t]*(?:,[ \t]*|$))+")
# An entry that is no scalar: a nested list or mapping, a block scalar, an anchor, alias or
# tag, a complex key; a ``KEY=value`` assignment is judged by its own key.
_NO_SCALAR = re.compile(r"[-\[{|>&*!?#]|[A-Za-z_][\w.-]*=")


# The end of a line that may open a list: a key's colon, then "[" or nothing (a comment) and
# a sequence entry on the next line of content.
_LOOK_BACK = 256
_OPENS_LIST = re.compile(r":[ \t]*(?:\[|(?:#.*)?\n(?:[ \t]*(?:#.*)?\n)*[ \t]*-(?:[ \t]|$))", re.M)


def may_hold_lists(text: str) -> bool:
    """Whether a document may hold a list under a secret-named key (a fast test of its
    text); False means ``Layout.list_owner`` is None for every line."""
    for m in _OPENS_LIST.finditer(text):
        # Only a key near its line's start opens a list: the look back stays bounded (a
        # minified JSON line of a million "key":[ stays linear).
        start = text.rfind("\n", max(0, m.start() - _LOOK_BACK), m.start()) + 1
        if not start and m.start() >= _LOOK_BACK:
            continue
        line = text[start:m.end()].split("\n", 1)[0]
        if SECRETISH.search(line.lower()) and (key := LEADING_KEY.match(line.lstrip(" \t-"))) \
                and key_role(key.group(2).strip()):
            return True
    return False


# A key that owns a list is one word (no label of text: "Docker Swarm secrets (swarm only):");
# in prose one written as code, lower case (k3s_tokens, api_keys) or an environment
# variable's capitals (API_TOKENS): "Passwords:" over a bullet list of tools is a label.
_ONE_WORD_KEY = re.compile(r"[A-Za-z_][\w.-]*")
_CODE_KEY = re.compile(r"[a-z_][\w.-]*|[A-Z][A-Z0-9]*_[A-Z0-9_]+")


class ListOwner(NamedTuple):
    """The key whose list a line's items belong to: its line (0-based), its name, and
    ``flow`` (the items are a flow list's, ``key: [`` above) or not (``- item``)."""

    line: int
    key: str
    flow: bool


class _Level(NamedTuple):
    column: int  # where the key starts
    words: frozenset[str]  # the key words of it and every level above
    owner: ListOwner | None  # the key as an owner of items below it (a secret-named key)
    opens: str  # "block": its value is on the lines below; "flow": a "[" ends its line


def _level(line: int, column: int, m: re.Match, rest: str, top: _Level | None,
           code: bool) -> _Level:
    """The level a key opens: ``m`` is ``LEADING_KEY``'s match of ``rest``, the line from
    the key on; a secret-named key of one word may own the items of a list below (``code``:
    the line is no prose, where only a key written as code may)."""
    key = m.group(2).strip()
    value = rest[m.end():].split(" #", 1)[0].strip()
    opens = "block" if not value else "flow" if value == "[" else ""
    owner = ListOwner(line, key, False) if opens and (_ONE_WORD_KEY if code else _CODE_KEY) \
        .fullmatch(key) and key_role(key) else None
    return _Level(column, (top.words if top else frozenset()).union(key_words(key)), owner, opens)


class Layout:
    """Per line: ``code`` (a code block, or any line of a non-prose kind), ``meta`` (front
    matter, org drawers) or prose; the key words of each line's YAML/JSON parents; the
    secret-named key whose list it is an item of."""

    def __init__(self, lines: list[str], kind: str):
        self.prose_kind = kind in PROSE_KINDS
        self.explains = kind in EXPLAINING_KINDS
        self.mode = ["code"] * len(lines) if not self.prose_kind else self._modes(lines)
        self.lines = lines
        self._parents_of: list[frozenset[str]] | None = None
        self._owners: dict[int, ListOwner] = {}

    def parents(self, number: int) -> frozenset[str]:
        """The key words of line ``number``'s YAML/JSON parents (found on first use)."""
        return self._structure_read()[0][number]

    def list_owner(self, number: int) -> ListOwner | None:
        """The secret-named key (``key_role``) whose list line ``number`` holds scalar
        items of: ``- item`` under ``key:`` (at its column too), the strings of a JSON array
        or YAML flow list opened by ``key: [``; None for any other line (a pair, a mapping
        entry, prose)."""
        return self._structure_read()[1].get(number)

    def _structure_read(self) -> tuple[list[frozenset[str]], dict[int, ListOwner]]:
        """``_structure`` of the document, worked out on first use."""
        if self._parents_of is None:
            self._parents_of, self._owners = self._structure(self.lines, self.mode)
        return self._parents_of, self._owners

    @staticmethod
    def _modes(lines: list[str]) -> list[str]:
        modes, fence = [], None
        front = bool(lines) and lines[0].strip() in ("---", "+++")
        for i, line in enumerate(lines):
            indented = line.startswith(("    ", "\t")) and bool(line.strip()) and i > 0 and (
                not lines[i - 1].strip() or modes[-1] == "code")
            if front:
                modes.append("meta")
                front = not (i > 0 and line.strip() in ("---", "+++", "..."))
            elif fence is not None or "#+" in line and _ORG_BLOCK.match(line):
                modes.append("code")
                if fence is not None and line.strip().lower().startswith(fence):
                    fence = None
                elif fence is None:
                    fence = "#+end" if _ORG_BLOCK.match(line).group(1).lower() == "begin" \
                        else None
            elif ("```" in line or "~~~" in line) and (m := _FENCE.match(line)):
                modes.append("code")
                fence = m.group(1)
            else:
                drawer = ":" in line and DRAWER_LINE.match(line)
                modes.append("meta" if drawer else "code" if indented else "prose")
        return modes

    @staticmethod
    def _structure(lines: list[str], modes: list[str]
                   ) -> tuple[list[frozenset[str]], dict[int, ListOwner]]:
        """Per line the key words of its parents, and the lines that are items of a
        secret-named key's list with that key (``list_owner``). Comments and blank lines
        close no level."""
        parents, owners, stack = [], {}, []
        for i, line in enumerate(lines):
            body = line.lstrip()
            column = len(line) - len(body)
            entry = _ENTRY.match(body) if body[:1] == "-" else None
            if body and body[0] != "#":
                while stack and _closed_by(stack[-1], column, entry):
                    stack.pop()
            top = stack[-1] if stack else None
            parents.append(top.words if top else frozenset())
            if not body or body[0] == "#":
                continue
            rest = body[entry.end():] if entry else body
            if ":" in rest and (m := LEADING_KEY.match(rest)):
                code = modes[i] != "prose"
                stack.append(_level(i, column + len(body) - len(rest), m, rest, top, code))
            elif top and top.owner and _is_item(top, entry, rest):
                owners[i] = top.owner._replace(flow=not entry)
        return parents, owners

    def comment_above(self, number: int, most: int = 4) -> str:
        """The comment lines right above line ``number`` (``#``, ``//``, ``;``; at most
        ``most``, nearest last), joined by spaces: what a configuration key is documented as."""
        block: list[str] = []
        k = number - 1
        while k >= 0 and len(block) < most and (m := _COMMENT.match(self.lines[k])):
            block.insert(0, self.lines[k][m.end():].strip())
            k -= 1
        return " ".join(block)

    def in_code(self, number: int, pos: int, spans: list[tuple[int, int]]) -> bool:
        """Whether ``pos`` of line ``number`` is code: a code line, or inside one of the
        line's inline code ``spans`` (``inline_code``) in prose."""
        if self.mode[number] != "prose":
            return self.mode[number] == "code"
        return any(s < pos < e for s, e in spans)


def _closed_by(level, column: int, entry) -> bool:
    """Whether a line at ``column`` (``entry``: its ``- `` match) ends ``level``. A
    sequence's entries may stand at their key's column (``key:\n- a``)."""
    return level.column > column or level.column == column and not (
        entry and level.opens == "block")


def _is_item(level, entry, rest: str) -> bool:
    """Whether a line whose text after any ``- `` is ``rest`` is an item of ``level``'s list:
    a block entry holding a scalar, or a line of a multi-line flow list."""
    if entry:
        return level.opens == "block" and bool(rest) and not _NO_SCALAR.match(rest)
    return level.opens == "flow" and bool(FLOW_ITEMS.fullmatch(rest.rstrip()))


def inline_code(line: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each inline code span: a run of backticks to the next run of the
    same length (CommonMark), found in one pass."""
    if "`" not in line:
        return []
    runs = [(m.start(), m.end()) for m in re.finditer(r"`+", line)]
    following, last = [None] * len(runs), {}
    for k in range(len(runs) - 1, -1, -1):
        size = runs[k][1] - runs[k][0]
        following[k], last[size] = last.get(size), k
    spans, k = [], 0
    while k < len(runs):
        if following[k] is None:
            k += 1
            continue
        spans.append((runs[k][0], runs[following[k]][1]))
        k = following[k] + 1
    return spans


