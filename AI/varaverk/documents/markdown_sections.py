"""Markdown chunking by headings, with markdown-it-py (kinds readme, manual, doc).

Headings are whatever the CommonMark parser says they are: ATX (``## X``) and setext
(``X`` over ``===``/``---``) at the top level of the document, never a ``#`` line inside a
fenced (```` ``` ````, ``~~~``) or indented code block, nor a heading quoted inside a
block quote or list. A paragraph made only of MDX ``import X from "..."`` lines (Docusaurus
pages) is site-generator code and is left out, as are lines of an HTML block that hold one bare
tag and no words (``<TabItem value="yaml">``, ``</ConfigTabs>``) or one HTML comment for a tool
(``<!-- markdownlint-disable -->``, ``<!-- toc -->``). YAML front matter is parsed
(mdit-py-plugins' front_matter plugin, then PyYAML) into ``meta``; it is never chunk text and
never a setext underline. Front matter that is too large, nested too deep, or whose aliases
expand too far (an alias bomb) is refused unread: the page is chunked without metadata and a
warning names the file.

One chunk per heading: its body is the text from the line after the heading to the next
heading of any level, without leading and trailing blank lines; the chunk's line range starts
at the heading line. Text before the first heading is a chunk titled with the front matter's
``title`` (or ``""``).

Fields:
    - ``title``: the nearest heading's text as written (inline Markdown kept, no ``#``s,
      trimmed), e.g. ``Retention at a glance`` or ```environment_vars```.
    - ``section``: the heading trail above it joined with `` > `` (``Deploy Guide > Steps``
      for a ``### Substep``), ``""`` for a top-level heading; so ``section > title`` is the
      full heading path.
    - ``context``: ``path › H1 › H2 › H3`` (``chunks.SEP``). When the document has no level-1
      heading, the front matter's ``title`` leads the trail (``zones.md › Zones › Zone
      Inertia``), so a small per-option section still knows which page it is on.
    - A heading with an empty body produces no chunk when a deeper heading follows (its text
      lives on in the children's trail); an empty leaf heading becomes a chunk holding just
      its heading text, so nothing in the outline is lost.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from markdown_it import MarkdownIt
from mdit_py_plugins.front_matter import front_matter_plugin

from varaverk.documents.annotations import is_markdown_marker
from varaverk.documents.chunks import (HEADING_JOIN, MAX_LABEL_CHARS, Draft, cap_label,
                                       without_surrogates)
from varaverk.documents.guard import checkpoint

log = logging.getLogger(__name__)

_YAML_INFOS = {"yaml", "yml"}
# A line that is only one HTML/JSX tag (``<TabItem value="yaml">``, ``</ConfigTabs>``,
# ``<Dropdown models={x} />``): layout for the site generator, no words for a reader.
_BARE_TAG = re.compile(r"""^\s*</?[A-Za-z][\w.:-]*"""
                       r"""(\s+[\w:.-]+(=("[^"]*"|'[^']*'|\{[^}]*\}|[^\s>]+))?)*\s*/?>\s*$""")
# A line that is one HTML comment; when its text is for a tool (``<!-- markdownlint-disable -->``,
# ``<!-- toc -->``) it is left out (``varaverk.documents.annotations``).
_HTML_COMMENT = re.compile(r"^\s*<!--(?P<body>.*?)-->\s*$")
# MDX module imports (Docusaurus pages): code for the site generator, not documentation.
_MDX_IMPORT = re.compile(r"""^import\s(?P<names>.*)\sfrom\s++["'][^"']+["'];?\s*+$""")
_MDX_NAMES = re.compile(r"[\w{}\s,*]+")
_YAML_KEY = re.compile(r"^(?P<indent>\s*)(?:-\s+)?"
                       r"(?P<key>[A-Za-z_][\w.\-]*|\"[^\"]+\"|'[^']+')\s*:(\s|$)")


@functools.lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    # Block structure only: a heading's text is its inline token's ``content`` (the source as
    # written), so parsing emphasis and links inside every paragraph would be wasted time
    # (about 40% of a parse).
    return MarkdownIt("commonmark").use(front_matter_plugin).disable("inline")


# Front matter is a page's metadata, never a data file: no real page comes near these bounds,
# and they stop alias bombs (``tags: &a [*a]``, billion laughs) and deep nesting before any
# of it is built.
MAX_FRONT_MATTER_CHARS = 128 * 1024
MAX_FRONT_MATTER_DEPTH = 32            # nested lists and mappings
MAX_ALIAS_EXPANSION_CHARS = 64 * 1024  # what aliases may add to the metadata, expanded
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when installed


def parse_front_matter(raw: str) -> dict[str, Any]:
    """YAML front matter as JSON-safe metadata.

    A mapping becomes a dict with dates as ISO strings; anything else (a bare string, a
    list, YAML that does not parse or holds an impossible value such as ``2024-02-30``) is
    kept under ``front_matter`` so nothing is lost, with ``front_matter_error`` saying why.
    Front matter beyond the bounds above gives only ``{"front_matter_error": why}``. Never
    raises.
    """
    try:
        problem = front_matter_problem(raw)
        data = None if problem else yaml.load(raw, Loader=_YAML_LOADER)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
        return {"front_matter": raw,
                "front_matter_error": (str(exc).splitlines() or [type(exc).__name__])[0]}
    if problem:
        return {"front_matter_error": f"front matter not read: {problem}"}
    if data is None:
        return {}
    if not isinstance(data, dict):
        return {"front_matter": raw}
    return {without_surrogates(str(k)): _json_safe(v) for k, v in data.items()}


def front_matter_problem(raw: str) -> str:
    """Why front matter is refused unread, or ``""`` when it is within the bounds.

    Reads the YAML as a stream of events (never building it): its size, its nesting depth,
    and the characters its aliases would add once expanded (a scalar counts its length
    plus one, a list or mapping one); an alias inside its own anchor is refused outright.

    Raises:
        yaml.YAMLError: the YAML does not parse.
    """
    if len(raw) > MAX_FRONT_MATTER_CHARS:
        return f"larger than {MAX_FRONT_MATTER_CHARS // 1024} KiB"
    open_anchors: list[tuple[str | None, int]] = []  # (anchor, size at its start) per level
    sizes: dict[str, int] = {}  # anchor -> its node's expanded size
    size = added = 0
    for event in yaml.parse(raw, Loader=_YAML_LOADER):
        if isinstance(event, yaml.AliasEvent):
            if any(anchor == event.anchor for anchor, _ in open_anchors):
                return f"the alias *{event.anchor} refers to itself (a recursive alias)"
            grown = sizes.get(event.anchor, 0)
            size, added = size + grown, added + grown
            if added > MAX_ALIAS_EXPANSION_CHARS:
                return (f"its aliases expand to more than {MAX_ALIAS_EXPANSION_CHARS // 1024}"
                        " KiB (an alias bomb)")
        elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            open_anchors.append((event.anchor, size))
            size += 1
            if len(open_anchors) > MAX_FRONT_MATTER_DEPTH:
                return f"nested deeper than {MAX_FRONT_MATTER_DEPTH} levels"
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, start = open_anchors.pop()
            if anchor is not None:
                sizes[anchor] = size - start
        elif isinstance(event, yaml.ScalarEvent):
            size += len(event.value) + 1
            if event.anchor is not None:
                sizes[event.anchor] = len(event.value) + 1
    return ""


def _json_safe(value: Any) -> Any:
    """Front matter values as JSON: dates as ISO strings, keys as strings, strings without
    lone surrogates (a YAML ``"\\ud800"`` escape)."""
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if isinstance(value, dict):
        return {without_surrogates(str(k)): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, str):
        return without_surrogates(value)
    if value is None or isinstance(value, (int, float, bool)):
        return value
    return without_surrogates(str(value))


def yaml_key_paths(lines: list[str], first: int, end: int) -> dict[int, str]:
    """For each line (1-based) of a YAML block, the keys it is nested under (``a > b``).

    Lines ``first..end-1`` (0-based) are the block's content. Used to label the parts of a
    long YAML block split by the budget, so a part starting deep inside ``birdseye:`` says so.
    """
    out: dict[int, str] = {}
    stack: list[tuple[int, str]] = []  # (indent, key) of the open mappings
    for n in range(first, min(end, len(lines))):
        line = lines[n]
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if stack:
            out[n + 1] = HEADING_JOIN.join(key for _, key in stack)
        match = _YAML_KEY.match(line)
        if match and not line.lstrip().startswith("#"):
            stack.append((indent, match.group("key").strip("\"'")))
    return out


def _is_mdx_import(line: str) -> bool:
    """``import X from "..."``: the names are matched apart, as one pattern with white space
    on both sides of them backtracked over every space of a long line (quadratic)."""
    m = _MDX_IMPORT.match(line)
    return bool(m and m.group("names").strip() and _MDX_NAMES.fullmatch(m.group("names")))


@dataclass
class Outline:
    """What one pass over markdown-it's tokens finds in a document."""

    meta: dict[str, Any] = field(default_factory=dict)
    body_start: int = 0  # first line (0-based) that may hold text: after the front matter
    # (level, first line, end line, text): lines 0-based, the end exclusive, as markdown-it maps
    headings: list[tuple[int, int, int, str]] = field(default_factory=list)
    labels: dict[int, str] = field(default_factory=dict)   # YAML key paths inside fences
    skipped: set[int] = field(default_factory=set)   # 0-based lines left out (MDX, bare tags)


def _outline(tokens, lines: list[str]) -> Outline:
    """Front matter, top-level headings, YAML fence labels and left-out lines, in one pass."""
    out = Outline()
    for i, tok in enumerate(tokens):
        if not tok.map:
            continue
        if tok.type == "fence" and tok.info.strip().lower() in _YAML_INFOS:
            out.labels.update(yaml_key_paths(lines, tok.map[0] + 1, tok.map[1] - 1))
        elif tok.type == "paragraph_open" and tok.level == 0 \
                and all(_is_mdx_import(lines[n]) for n in range(*tok.map)):
            out.skipped.update(range(tok.map[0], tok.map[1]))
        elif tok.type == "html_block" and tok.level == 0:
            out.skipped.update(n for n in range(*tok.map)
                               if _BARE_TAG.match(lines[n]) or _tool_comment(lines[n]))
        elif tok.type == "front_matter":
            out.meta = parse_front_matter(tok.content)
            out.body_start = tok.map[1]
        elif tok.type == "heading_open" and tok.level == 0:
            inline = tokens[i + 1]
            out.headings.append((int(tok.tag[1:]), tok.map[0], tok.map[1],
                                 _INLINE_COMMENT.sub(_inline_comment, inline.content).strip()))
    return out


# Tried only where a run of blanks starts, so a long run is not rescanned from every blank.
_INLINE_COMMENT = re.compile(r"(?<!\s)\s*+<!--(?P<body>.*?)-->")


def _inline_comment(match: re.Match) -> str:
    """An HTML comment in a heading (``## X <!-- omit in toc -->``): gone when for a tool."""
    return "" if is_markdown_marker(match.group("body")) else match.group(0)


def _tool_comment(line: str) -> bool:
    """Whether a line is one HTML comment written for a tool."""
    match = _HTML_COMMENT.match(line)
    return bool(match and is_markdown_marker(match.group("body")))


def _numbered(lines: list[str], skipped: set[int], first: int,
              end: int) -> list[tuple[int, str]]:
    """Lines ``first..end-1`` (0-based) as (1-based number, text), left-out lines dropped."""
    out: list[tuple[int, str]] = []
    gap = False  # a left-out line since the last kept one
    for n in range(first, min(end, len(lines))):
        if n in skipped:
            gap = True
            continue
        blank = not lines[n].strip()
        # Leaving out a line must not leave two blank lines where the file had one.
        if not (blank and gap and out and not out[-1][1].strip()):
            out.append((n + 1, lines[n]))
        gap = gap and blank
    return out


def markdown_drafts(path: str, text: str) -> list[Draft]:
    """Chunk drafts for a Markdown document, one per heading plus the text before the first.

    Args:
        path: repository-relative path (named in the warning about unusable front matter).
        text: the decoded, newline-normalised document.
    """
    lines = text.split("\n")
    outline = _outline(_parser().parse(text), lines)
    meta, headings = outline.meta, outline.headings
    if "front_matter_error" in meta:
        log.warning("%s: front matter not used as metadata: %s", path,
                    meta["front_matter_error"])
    page_title = meta.get("title") if isinstance(meta.get("title"), str) else ""
    page_title = page_title.strip()
    lead_trail = [page_title] if page_title and not any(h[0] == 1 for h in headings) else []

    drafts: list[Draft] = []
    first_heading = headings[0][1] if headings else len(lines)
    before = _numbered(lines, outline.skipped, outline.body_start, first_heading)
    if any(t.strip() for _, t in before):
        drafts.append(Draft("", page_title, lead_trail, before, meta=meta))
    drafts.extend(heading_drafts(outline, lines, lead_trail))
    return drafts


def heading_drafts(outline: Outline, lines: list[str], lead_trail: list[str]) -> list[Draft]:
    """One draft per heading with text (or per empty leaf heading), in document order."""
    headings = outline.headings
    drafts: list[Draft] = []
    trail: list[tuple[int, str]] = []  # (level, text) of the open headings
    for k, (level, first, end, title) in enumerate(headings):
        checkpoint()
        if len(title) > MAX_LABEL_CHARS:  # too long to be a label: its words stay text
            title, end = cap_label(title), first
        while trail and trail[-1][0] >= level:
            trail.pop()
        parents = [t for _, t in trail]
        trail.append((level, title))
        next_first = headings[k + 1][1] if k + 1 < len(headings) else len(lines)
        body = _numbered(lines, outline.skipped, end, next_first)
        if not any(t.strip() for _, t in body):
            has_children = k + 1 < len(headings) and headings[k + 1][0] > level
            if has_children or not title:
                continue
            body = [(first + 1, title)]
        drafts.append(Draft(HEADING_JOIN.join(parents), title, lead_trail + parents + [title],
                            body, start_line=first + 1, meta=outline.meta,
                            part_labels=outline.labels))
    return drafts
