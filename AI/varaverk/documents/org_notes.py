"""org-mode and org-roam notes (kind ``org``): headlines as sections, drawers as metadata.

Our own small parser, table-tested (tests/chunking/test_notes.py): orgparse (PyPI) reads a
``* line`` inside ``#+begin_src … #+end_src`` as a headline, and gives no line ranges for body
text, both of which chunking needs. What it understands:

* ``*``, ``**``, … headlines: one chunk per headline, ``section`` the ancestors' titles joined
  with `` > `` and ``title`` the headline without its TODO keyword, priority and tags. A
  headline with no body of its own and children gives no chunk (its title lives on in the
  children's trail); text before the first headline is the file's lead chunk.
* ``#+title:`` names the note (else the file name) and leads every context trail;
  ``#+filetags:`` and headline ``:tags:`` (inherited by sub-headlines) are metadata.
* Drawers (``:PROPERTIES:`` … ``:END:``, ``:LOGBOOK:`` …) are never text: a properties
  drawer's entries go to ``meta["properties"]`` (``ID``, ``ROAM_ALIASES``, …). Tags and
  ``ROAM_ALIASES`` become the chunk's lexical ``keywords`` (matched by FTS5, never embedded).
* ``#+begin_X`` … ``#+end_X`` blocks: their lines are text, never headlines or drawers; the
  ``#+begin``/``#+end`` lines themselves, other ``#+KEYWORD:`` lines, planning lines
  (``SCHEDULED:``, ``DEADLINE:``, ``CLOSED:``) and ``# comments`` are left out.
* Links: ``[[id:X][shown]]`` and ``[[id:X]]`` are written as the title of the node with
  ``:ID: X`` (from ``links``), else the shown text; ``[[target][shown]]`` as the shown text,
  ``[[target]]`` as the target.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Iterable

from varaverk.documents.chunks import (HEADING_JOIN, MAX_LABEL_CHARS, Draft, cap_label,
                                       trim_blank_lines, unique_words)
from varaverk.documents.guard import checkpoint
from varaverk.named_sources import file_stem

# No pattern here lets a lazy group meet a run of white space before the line's end (each
# step would scan the run again: quadratic in a long line); values are stripped in code.
HEADLINE = re.compile(r"^(\*+)\s++(.*)")
_TAGS = re.compile(r"(?<!\s)\s++(:(?:[\w@#%]++:)++)\s*+$")
_TODO = re.compile(r"^(?:TODO|DONE|NEXT|WAIT|WAITING|HOLD|CANCELLED|CANCELED|STARTED)\s+")
_PRIORITY = re.compile(r"^\[#[A-Za-z0-9]\]\s+")
_KEYWORD = re.compile(r"^\s*+#\+(\w+):\s*+(.*)")
_BLOCK_BEGIN = re.compile(r"^\s*#\+begin_(\w+)", re.IGNORECASE)
_DRAWER = re.compile(r"^\s*:([\w-]+):\s*$")
_PROPERTY = re.compile(r"^\s*+:([\w+-]+):\s*+(.*)")
_PLANNING = re.compile(r"^\s*(SCHEDULED|DEADLINE|CLOSED):")
_LINK = re.compile(r"\[\[([^\[\]]+)\](?:\[([^\[\]]*)\])?\]")


@dataclass
class OrgNode:
    """One headline (level 0: the file before the first headline).

    ``lines``: body text as ``(line number, text)``, drawers and keywords left out.
    """

    level: int
    title: str
    line: int
    tags: list[str] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    lines: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class OrgDocument:
    """A parsed org file: ``keywords`` (``TITLE``, ``FILETAGS``… upper case) and its nodes,
    the file-level node first."""

    keywords: dict[str, str]
    nodes: list[OrgNode]


def split_tags(raw: str) -> list[str]:
    """``:a:b:`` -> ``["a", "b"]`` (filetags may also be space-separated)."""
    return [t for t in re.split(r"[:\s]+", raw) if t]


def parse_org(text: str) -> OrgDocument:
    """Parse org text into headline nodes (see the module doc). Never raises."""
    nodes = [OrgNode(0, "", 1)]
    keywords: dict[str, str] = {}
    block = None      # the open #+begin_X block's X
    drawer = None     # the open drawer's name
    for number, line in enumerate(text.split("\n"), start=1):
        checkpoint()
        node = nodes[-1]
        if block is not None:
            if re.match(rf"^\s*#\+end_{re.escape(block)}\b", line, re.IGNORECASE):
                block = None
            else:
                node.lines.append((number, line))
            continue
        if drawer is not None:
            if line.strip().upper() == ":END:":
                drawer = None
            elif drawer == "PROPERTIES" and (m := _PROPERTY.match(line)):
                node.properties[m.group(1).upper()] = m.group(2).rstrip()
            continue
        if (m := HEADLINE.match(line)):
            nodes.append(_headline(m, number))
            continue
        if (m := _BLOCK_BEGIN.match(line)):
            block = m.group(1)
            continue
        if (m := _DRAWER.match(line)) and m.group(1).upper() != "END":
            drawer = m.group(1).upper()
            continue
        if (m := _KEYWORD.match(line)):
            if node.level == 0:
                keywords.setdefault(m.group(1).upper(), m.group(2).rstrip())
            continue
        if _PLANNING.match(line) or re.match(r"^\s*#(\s|$)", line):
            continue
        node.lines.append((number, line))
    return OrgDocument(keywords, nodes)


def _headline(m: re.Match, number: int) -> OrgNode:
    rest = m.group(2).rstrip()
    tags: list[str] = []
    if (t := _TAGS.search(rest)):
        tags = split_tags(t.group(1))
        rest = rest[:t.start()]
    rest = _PRIORITY.sub("", _TODO.sub("", rest)).strip()
    node = OrgNode(len(m.group(1)), cap_label(rest), number, tags)
    if len(rest) > MAX_LABEL_CHARS:  # too long to be a label: its words stay text
        node.lines.append((number, m.group(0)))
    return node


def aliases(properties: dict[str, str]) -> list[str]:
    """``ROAM_ALIASES`` as a list: space-separated, double quotes group words."""
    raw = properties.get("ROAM_ALIASES", "")
    try:
        return [a for a in shlex.split(raw) if a]
    except ValueError:
        return raw.split()


def org_title(path: str, doc: OrgDocument) -> str:
    """``#+title``, else the file name without ``.org``."""
    return doc.keywords.get("TITLE", "").strip() or file_stem(path)


def org_ids(path: str, text: str) -> dict[str, str]:
    """``{:ID: value: title}`` of a file: the file node's ID names the note's title, a
    headline's ID the headline."""
    doc = parse_org(text)
    title = org_title(path, doc)
    out = {}
    for node in doc.nodes:
        if node.properties.get("ID"):
            out[node.properties["ID"].strip()] = node.title if node.level else title
    return out


def resolve_org_links(line: str, links: dict[str, str]) -> str:
    """``line`` with org links written as their titles or shown text."""
    def shown(m: re.Match) -> str:
        target, desc = m.group(1).strip(), (m.group(2) or "").strip()
        if target.lower().startswith("id:"):
            return links.get("id:" + target[3:].strip()) or desc or target[3:].strip()
        return desc or re.sub(r"^file:", "", target)
    return _LINK.sub(shown, line)


def org_drafts(path: str, text: str, links: dict[str, str]) -> list[Draft]:
    """Chunk drafts for one org file (see the module doc).

    Args:
        path: the stored path (``roam:20240101-backups.org``). text: the decoded file.
        links: ``"id:<ID>"`` -> title for ``[[id:…]]`` links (``note_links.link_titles``).

    Returns:
        One draft per headline with text (and the lead text), ``meta`` holding ``title``,
        ``tags``, ``aliases``, ``properties``, ``id`` and ``keywords`` (tags and aliases).
    """
    doc = parse_org(text)
    title = org_title(path, doc)
    file_tags = split_tags(doc.keywords.get("FILETAGS", ""))
    file_props = doc.nodes[0].properties
    drafts: list[Draft] = []
    stack: list[OrgNode] = []
    nodes = doc.nodes
    for i, node in enumerate(nodes):
        while stack and stack[-1].level >= node.level and node.level:
            stack.pop()
        ancestors = [n for n in stack if n.level]
        if node.level:
            stack.append(node)
        body = trim_blank_lines([(n, resolve_org_links(t, links)) for n, t in node.lines])
        has_children = i + 1 < len(nodes) and nodes[i + 1].level > node.level > 0
        if not body and (has_children or not node.level):
            continue
        tags = _inherited(file_tags, ancestors, node)
        alias_list = aliases(file_props) + (aliases(node.properties) if node.level else [])
        meta = {"title": title, "tags": tags, "aliases": alias_list,
                "properties": node.properties or (file_props if not node.level else {}),
                "id": node.properties.get("ID") or file_props.get("ID", ""),
                "keywords": unique_words(tags + alias_list)}
        trail = [title, *[a.title for a in ancestors], *([node.title] if node.level else [])]
        lines = body or [(node.line, node.title)]
        drafts.append(Draft(section=HEADING_JOIN.join(a.title for a in ancestors),
                            title=node.title if node.level else title, trail=trail,
                            lines=lines, start_line=node.line if node.level else None,
                            meta=meta))
    return drafts


def _inherited(file_tags: list[str], ancestors: Iterable[OrgNode], node: OrgNode) -> list[str]:
    tags = list(file_tags)
    for n in [*ancestors, node]:
        tags.extend(n.tags)
    return unique_words(tags)
