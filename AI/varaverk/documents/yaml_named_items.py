"""YAML list items named in prose: Ansible tasks, plays, blocks and handlers, CI steps.

In an Ansible playbook or role the ``name:`` of each task, play, block and handler is its
author's account of what the step does (``- name: Check if a reboot is needed on all
servers``), and many task files hold no other comment. ``conf_templates`` makes each such
item a chunk titled with its name; this module finds them.

An item is a line ``- ...`` of a block sequence; its ``name:`` is a key of the item's own
mapping (on the dash line or on a later line at the item's key column). The name is prose
(``prose_name``) when, with Jinja spans left out, it has two words or more apart and words
make up most of it: ``my-app``, ``LOG_LEVEL``, ``{{ item }}`` and ``Install {{ pkg }}`` are not.

Extent of a named item (0-based, inclusive line numbers):

- it runs from its dash line to the last line before the next content line at or left of the
  dash's column, without trailing blank lines, and without trailing comments at or left of
  the dash's column (those introduce what follows); deeper trailing comments stay in it;
- the comment lines directly above the dash (no blank line between, at or left of the dash's
  column, stopping at a group banner) are its own, as a key's comment block is;
- a key with no value directly above it (blank lines aside) is the key that opens its list
  (``tasks:``, ``block:``, ``handlers:``) and goes with it, so it is never a chunk alone,
  with the comment block above that key.

Named items inside a named item (a play's tasks, a block's tasks) are its ``children``;
their ranges lie inside the parent's and do not overlap. One pass over the lines, with at
most ``_MAX_DEPTH`` open items (deeper ones are part of their parent), so the work is linear
in the file's size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from varaverk.documents.chunks import reads_as_prose

# A name reads as prose from two words on ("Install nginx", "restart nginx").
_NAME_WORDS = 2
# Items nested deeper than this are part of the item that holds them: bounds the work per
# line on hostile input (a staircase of thousands of nested dashes).
_MAX_DEPTH = 32
_ITEM = re.compile(r"( *)- +(?=\S)")
_NAME_KEY = re.compile(r"name\s*:(?:\s+|$)")
_BARE_KEY = re.compile(r"\s*[A-Za-z_][A-Za-z0-9_.\-]*\s*:\s*$")
_JINJA_CLOSE = {"{": "}}", "%": "%}", "#": "#}"}


@dataclass
class NamedItem:
    """A list item whose ``name:`` reads as prose.

    Attributes:
        name: the name as written (quotes and a trailing YAML comment removed).
        first: 0-based first line: its opening key or comment block, else ``dash``.
        dash: 0-based line of the item's ``-``.
        end: 0-based last line, inclusive.
        children: the named items directly inside it, in line order.
    """

    name: str
    first: int
    dash: int
    end: int
    children: list[NamedItem] = field(default_factory=list)


@dataclass
class _Open:
    indent: int            # column of the dash
    key_col: int | None    # column of the item's own keys (None until known: a lone "-")
    dash: int
    name: str | None = None


def prose_name(value: str) -> str | None:
    """The name a ``name:`` value gives when it reads as prose, else None.

    ``value`` is the text after ``name:`` on its line; an anchor or tag before it, surrounding
    quotes and a trailing YAML comment (`` # ...`` after a plain value) are removed. Block
    scalars (``>-``) and aliases (``*name``) are no name.
    """
    text = value.strip()
    while text[:1] in ("&", "!"):  # an anchor or a tag before the value
        text = text.partition(" ")[2].lstrip()
    if text[:1] in ("'", '"'):
        close = text.find(text[0], 1)
        text = text[1:close] if close > 0 else text[1:]
    else:
        cut = text.find(" #")
        text = (text if cut < 0 else text[:cut]).rstrip()
    text = text.strip()
    words = _without_jinja(text)
    # Words apart, not only in it: "my-app" and "LOG_LEVEL" are identifiers.
    prose = len(words.split()) >= _NAME_WORDS and reads_as_prose(words, _NAME_WORDS)
    return text if prose else None


def _without_jinja(text: str) -> str:
    """``text`` with each Jinja span (``{{ }}``, ``{% %}``, ``{# #}``) replaced by a space; an
    unclosed span runs to the end. String searches only, each from where the last ended."""
    out: list[str] = []
    i = 0
    while True:
        j = text.find("{", i)
        close = _JINJA_CLOSE.get(text[j + 1: j + 2]) if j >= 0 else None
        if close is None:
            out.append(text[i:] if j < 0 else text[i: j + 1])
            if j < 0:
                return "".join(out)
            i = j + 1
            continue
        out.append(text[i:j] + " ")
        k = text.find(close, j + 2)
        if k < 0:
            return "".join(out)
        i = k + 2


def named_items(lines: list[str], skip: set[int],
                is_banner: Callable[[int], bool]) -> list[NamedItem]:
    """The outermost named items of a YAML file, in line order, each with its children.

    Args:
        lines: the file's lines. skip: 0-based lines to treat as absent (machine
            annotations). is_banner: whether a 0-based line is a group banner (a comment
            block above an item stops at one); asked only about comments above items.
    """
    found: list[NamedItem] = []
    stack: list[_Open] = []
    last_content = -1
    trailing: list[tuple[int, int]] = []  # (line, indent) of comments since the last content
    for i, line in enumerate(lines):
        stripped = line.lstrip(" ")
        if i in skip or not stripped.strip():
            continue
        indent = len(line) - len(stripped)
        if stripped.startswith("#"):
            trailing.append((i, indent))
            continue
        while stack and stack[-1].indent >= indent:
            _close(stack.pop(), last_content, trailing, found)
        if stripped[0] == "-" or (stack and stack[-1].key_col in (None, indent)):
            _open_or_name(stack, line, i, indent)
        last_content, trailing = i, []
    while stack:
        _close(stack.pop(), last_content, trailing, found)
    for item in found:
        item.first = _first_line(lines, skip, is_banner, item.dash)
    return _nest(sorted(found, key=lambda item: item.dash))


def _open_or_name(stack: list[_Open], line: str, i: int, indent: int) -> None:
    """Open an item at a dash line, or take a ``name:`` key of the innermost open item."""
    if stack and stack[-1].key_col is None:
        stack[-1].key_col = indent  # the first key under a lone "-"
    item = _ITEM.match(line)
    if item or line.strip() == "-":
        if len(stack) < _MAX_DEPTH:
            stack.append(_Open(indent, item.end() if item else None, i))
            if item:
                _take_name(stack[-1], line[item.end():])
    elif stack and stack[-1].key_col == indent:
        _take_name(stack[-1], line[indent:])


def _take_name(item: _Open, text: str) -> None:
    key = _NAME_KEY.match(text)
    if key and item.name is None:
        item.name = prose_name(text[key.end():]) or ""


def _close(item: _Open, last_content: int, trailing: list[tuple[int, int]],
           found: list[NamedItem]) -> None:
    """Record a closed item when its name is prose: it ends at the last content line, or at
    the last trailing comment deeper than its dash."""
    if not item.name:
        return
    end = last_content
    for n, indent in reversed(trailing):
        if indent > item.indent:
            end = n
            break
    found.append(NamedItem(item.name, item.dash, item.dash, end))


def _first_line(lines: list[str], skip: set[int], is_banner: Callable[[int], bool],
                dash: int) -> int:
    """The first line of the item at ``dash``: its comment block, then its opening key and
    the comment block above that key."""
    indent = _indent(lines[dash])
    first = _comments_above(lines, skip, is_banner, dash, indent)
    n = first - 1
    while n >= 0 and (n in skip or not lines[n].strip()):
        n -= 1
    if n >= 0 and _BARE_KEY.match(lines[n]) and _indent(lines[n]) <= indent:
        first = _comments_above(lines, skip, is_banner, n, _indent(lines[n]))
    return first


def _comments_above(lines: list[str], skip: set[int], is_banner: Callable[[int], bool],
                    line: int, indent: int) -> int:
    """The first of the comment lines at or left of column ``indent`` directly above
    ``line`` (no blank line between; a banner ends them), else ``line`` (0-based)."""
    first = n = line
    while n > 0:
        n -= 1
        if n in skip:
            continue
        above = lines[n].lstrip(" ")
        if not above.startswith("#") or _indent(lines[n]) > indent or is_banner(n):
            break
        first = n
    return first


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _nest(items: list[NamedItem]) -> list[NamedItem]:
    """Items sorted by dash line to a forest: an item inside another's range is its child."""
    roots: list[NamedItem] = []
    open_items: list[NamedItem] = []
    for item in items:
        while open_items and open_items[-1].end < item.dash:
            open_items.pop()
        (open_items[-1].children if open_items else roots).append(item)
        open_items.append(item)
    return roots
