"""Chunking commented configuration templates (kind ``template``).

Deployment/*.template, ``.env.example`` and similar files document each key in the comment
above it, and group keys under banners. Chunks:

    - the file's leading comment (up to the first blank line, key or banner): section ``""``,
      title ``""``;
    - group banners are boundaries and name the group (the chunk ``section``): ``# ── Mover
      stopper ──``, ``# --- X ---``, ``# === X ===``, ``# ##### X #####``, a name between two
      ruler lines (``# =====`` / ``# X`` / ``# =====``), and INI ``[section]`` lines;
    - comment lines right under a banner that no key claims (``# Used by Tools/x.sh``) are
      the group's lead chunk (title ``""``);
    - each key (``KEY=VALUE``, ``export KEY=VALUE``, ``key = value``, and commented-out
      ``#KEY=VALUE`` lines) with the comment block directly above it is one chunk: title =
      the key, section = the group. Continuation lines (an open quote, a trailing backslash)
      belong to the key;
    - YAML files (``*.yml.example``, compose files, commented ``*.yaml``) are cut at top-level
      keys instead, each with the comments above it, a commented-out key (``#key: value``,
      as reference configs ship their defaults) counting as a key with its commented-out
      nested lines; deeper structure stays inside its block;
    - in YAML, a list item whose ``name:`` reads as prose (an Ansible task, play, block or
      handler, a CI step: ``varaverk.documents.yaml_named_items``) is a chunk of its own
      titled with that name, holding its comment block above it and its lines (module,
      arguments, ``when:``, comments inside it); the items named inside it (a play's tasks)
      are chunks of their own, their trail holding the names they are nested in. The
      file's other lines are chunked by the rules above as if the items were absent;
    - a file without any comment (or prose name) is left out: its values alone document
      nothing;
    - any other comment paragraph is a chunk of its own (title ``""``), so nothing is lost.

Comment leaders (``#``, ``;``, ``//``) are removed from prose lines in the chunk text; key lines
are kept verbatim. Values in templates are placeholders, never secrets: real configuration
lives in git-ignored files that are never read.
"""

from __future__ import annotations

import re
from bisect import bisect_left

from varaverk.documents.annotations import annotation_lines, strip_trailing_annotation
from varaverk.documents.chunks import Draft, framed_name
from varaverk.documents.markdown_sections import yaml_key_paths as _yaml_key_paths
from varaverk.documents.yaml_named_items import NamedItem, named_items

_BANNER_CHARS = "─━═—–=-~*#_+"
_RULER = re.compile(rf"^[{re.escape(_BANNER_CHARS)}]{{3,}}$")
_INI_SECTION = re.compile(r"^\[(?P<name>[^\]]+)\]\s*$")
_KEY_LINE = re.compile(r"^(?:export\s+)?(?P<key>[A-Za-z_][A-Za-z0-9_.\-]*)\s*=")
# A commented-out key: no space between the name and "=", so prose such as
# "# Set x = 1 to ..." is not mistaken for one.
_COMMENTED_KEY = re.compile(r"^(?:export\s+)?(?P<key>[A-Za-z_][A-Za-z0-9_.\-]*)=")
_YAML_KEY = re.compile(r"^(?P<key>[A-Za-z_][A-Za-z0-9_.\-]*)\s*:(\s|$)")
# A commented-out top-level key ("#max_upload_size: 50M", no space after the "#") and the
# commented-out nested lines right under it ("#  - module: file_system").
_YAML_COMMENTED_KEY = re.compile(r"^#(?P<key>[A-Za-z_][A-Za-z0-9_.\-]*)\s*:(\s|$)")
_YAML_COMMENTED_NESTED = re.compile(r"^#(?:\s{2,}|\s*- )\S")
_COMMENT_LEADERS = ("#", ";", "//")
_YAML_SUFFIXES = (".yml", ".yaml")


def template_drafts(path: str, text: str) -> list[Draft]:
    """Chunk drafts for a commented configuration template.

    Args:
        path: repository-relative path; a ``.yml``/``.yaml`` name before any ``.example`` or
            ``.template`` suffix selects the YAML rules.
        text: the decoded, newline-normalised file.
    """
    lines = [strip_trailing_annotation(line) for line in text.split("\n")]
    # Machine annotations (``varaverk.documents.annotations``) are no comment: skipped as if
    # absent, so a key under nothing but ``# renovate: ...`` is documented by nothing.
    skip = annotation_lines(lines)
    if _is_yaml(path):
        return _yaml_file_drafts(lines, skip)
    if not any(_comment_body(line) is not None for n, line in enumerate(lines) if n not in skip):
        return []  # no comment, no documentation: values alone are left out
    return _env_drafts(lines, skip)


def _is_yaml(path: str) -> bool:
    name = path.lower().rsplit("/", 1)[-1]
    for suffix in (".example", ".template", ".sample", ".dist", ".tmpl", ".in"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name.endswith(_YAML_SUFFIXES)


def _comment_body(line: str) -> str | None:
    """The text of a comment line without its leader, or None when it is not a comment."""
    stripped = line.strip()
    for leader in _COMMENT_LEADERS:
        if stripped.startswith(leader):
            body = stripped[len(leader):]
            if leader == "#":
                body = body.lstrip("#")
            return body[1:] if body.startswith(" ") else body
    return None


def _banner_name(lines: list[str], i: int) -> tuple[str, int] | None:
    """(group name, lines used) when a banner starts at line i."""
    line = lines[i].strip()
    ini = _INI_SECTION.match(line)
    if ini:
        return ini.group("name").strip(), 1
    body = _comment_body(line)
    if body is None:
        return None
    body = body.strip()
    # "##### X #####" is matched as written (its leader is part of the banner), the others
    # ("# ── X ──") once the leader is gone.
    inline = framed_name(line, _BANNER_CHARS) or framed_name(body, _BANNER_CHARS)
    if inline:
        return inline, 1
    if _RULER.match(body) and i + 2 < len(lines):
        name = _comment_body(lines[i + 1])
        closing = _comment_body(lines[i + 2])
        if (name and name.strip() and not _RULER.match(name.strip()) and closing is not None
                and _RULER.match(closing.strip())):
            return name.strip(), 3
    return None


def _key_of(line: str) -> tuple[str, bool] | None:
    """(key, commented out) when the line assigns a key, else None."""
    body = _comment_body(line)
    if body is None:
        match = _KEY_LINE.match(line.strip())
        return (match.group("key"), False) if match else None
    # Only a key right after the leader ("#KEY=1", "# KEY=1"); an indented one ("#   KEY=1")
    # is an example inside a comment paragraph.
    match = _COMMENTED_KEY.match(body.rstrip())
    return (match.group("key"), True) if match else None


def _key_end(lines: list[str], i: int, commented: bool) -> int:
    """Index of the last line of the assignment starting at line i.

    A trailing backslash continues onto the next line; an opening quote without its closing
    quote runs to the line that closes it. Commented-out keys are single lines.
    """
    if commented:
        return i
    if lines[i].rstrip().endswith("\\"):
        j = i
        while j + 1 < len(lines) and lines[j].rstrip().endswith("\\"):
            j += 1
        return j
    value = lines[i].split("=", 1)[1].strip()
    for quote in ('"', "'"):
        if value.startswith(quote) and quote not in value[1:]:
            j = i + 1
            while j < len(lines) and quote not in lines[j]:
                j += 1
            return min(j, len(lines) - 1)
    return i


def _env_drafts(lines: list[str], skip: set[int]) -> list[Draft]:
    drafts: list[Draft] = []
    group = ""
    pending: list[tuple[int, str]] = []  # comment lines not yet claimed by a key

    def flush() -> None:
        # A comment paragraph that no key directly follows is a chunk of its own: the file's
        # leading comment, a group's lead ("Used by ...") or a free note.
        nonlocal pending
        if any(t.strip() for _, t in pending):
            drafts.append(Draft(group, "", [group], pending))
        pending = []

    i = 0
    while i < len(lines):
        line = lines[i]
        if i in skip:
            i += 1
            continue
        banner = _banner_name(lines, i)
        if banner:
            flush()
            group = banner[0]
            i += banner[1]
            continue
        if not line.strip():
            flush()
            i += 1
            continue
        key = _key_of(line)
        if key:
            name, commented = key
            end = _key_end(lines, i, commented)
            body = [(n + 1, lines[n].rstrip()) for n in range(i, end + 1)]
            drafts.append(Draft(group, name, [group, name], pending + body))
            pending = []
            i = end + 1
            continue
        body = _comment_body(line)
        pending.append((i + 1, (body if body is not None else line).rstrip()))
        i += 1
    flush()
    return drafts


def _yaml_file_drafts(lines: list[str], skip: set[int]) -> list[Draft]:
    """A YAML file's drafts: each list item named in prose (``yaml_named_items``) titled
    with its name, and when the file holds any comment, its other lines by the key rules of
    ``_yaml_drafts`` as if the items were absent (cut where an item lies between). A file
    of neither comments nor prose names gives nothing: values alone document nothing."""
    items = named_items(lines, skip, lambda n: _yaml_banner(lines, n) is not None)
    drafts: list[Draft] = []
    if any(_comment_body(line) is not None for n, line in enumerate(lines) if n not in skip):
        inside = {n for item in items for n in range(item.first, item.end + 1)}
        drafts = _yaml_drafts(lines, skip | inside)
        drafts = _around_items(lines, drafts, items) if items else drafts
    banners = [(n, name) for n in range(len(lines))
               if n not in skip and (name := _yaml_banner(lines, n))] if items else []
    starts = [n for n, _ in banners]
    names = [name for _, name in banners]
    for item in items:
        before = bisect_left(starts, item.first)  # banners above the item
        drafts += _item_drafts(lines, skip, item, names[before - 1] if before else "", [])
    drafts.sort(key=lambda d: d.lines[0][0])
    return drafts


def _yaml_banner(lines: list[str], i: int) -> str | None:
    """The group a one-line banner at column 0 on line ``i`` (0-based) opens, as
    ``_yaml_drafts`` reads it, else None."""
    if not lines[i].startswith(("#", ";", "/", "[")):
        return None
    banner = _banner_name(lines, i)
    return banner[0] if banner and banner[1] == 1 else None


def _around_items(lines: list[str], drafts: list[Draft], items: list[NamedItem]) -> list[Draft]:
    """``drafts`` of the lines outside ``items``, each cut where an item lies between two of
    its lines, so that every chunk's line range holds only its own lines. A piece without
    any comment line is left out: values alone document nothing (a play's ``hosts:`` and
    ``become:``; in a file without named items such a piece was joined to a documented key
    and stays as it was). A cut YAML block's pieces after an item are a block of their own
    (retrieval merges a block's keys)."""
    after = [0] * (len(lines) + 2)  # after[n]: 1 + last line of the last item ending before n
    for item in items:
        after[item.end + 2] = item.end + 2
    for n in range(1, len(lines) + 2):
        after[n] = max(after[n], after[n - 1])
    out = []
    for draft in drafts:
        pieces = [[draft.lines[0]]]
        for line in draft.lines[1:]:
            if after[line[0]] != after[pieces[-1][-1][0]]:
                pieces.append([])
            pieces[-1].append(line)
        for piece in pieces:
            if all(_comment_body(lines[n - 1]) is None for n, _ in piece):
                continue
            meta = dict(draft.meta)
            if "block" in meta:
                meta["block"] = max(meta["block"], after[piece[0][0]])
            out.append(Draft(draft.section, draft.title, draft.trail, piece, None, meta,
                             draft.part_labels))
    return out


def _item_drafts(lines: list[str], skip: set[int], item: NamedItem, group: str,
                 outer: list[str]) -> list[Draft]:
    """A named item's drafts, titled with its name: its lines up to its first child (its
    comment block above it as prose, the rest verbatim), each child's drafts in turn, and
    any of its lines between or after its children. The context trail holds the names of
    the items it is nested in."""
    trail = [group, *outer, item.name]
    drafts = []
    start = item.first
    for part_end, child in [(c.first, c) for c in item.children] + [(item.end + 1, None)]:
        body = [(n + 1, _item_line(lines[n], n < item.dash)) for n in range(start, part_end)
                if n not in skip]
        if start == item.first or any(t.strip() for _, t in body):
            drafts.append(Draft(group, item.name, trail, body))
        if child:
            drafts += _item_drafts(lines, skip, child, group, [*outer, item.name])
            start = child.end + 1
    return drafts


def _item_line(line: str, above: bool) -> str:
    """A line of a named item as its chunk holds it: a comment above the dash as prose."""
    body = _comment_body(line) if above and line.lstrip().startswith("#") else None
    return (line if body is None else body).rstrip()


def _yaml_drafts(lines: list[str], skip: set[int]) -> list[Draft]:
    drafts: list[Draft] = []
    group = ""
    comments: list[tuple[int, str]] = []
    block: list[tuple[int, str]] = []
    key = ""

    def flush_block() -> None:
        nonlocal block, key
        if any(t.strip() for _, t in block):
            drafts.extend(_block_drafts(lines, group, key, block))
        block, key = [], ""

    def flush_comments() -> None:
        nonlocal comments
        if any(t.strip() for _, t in comments):
            drafts.append(Draft(group, "", [group], comments))
        comments = []

    for i, line in enumerate(lines):
        if i in skip:
            continue
        banner = _banner_name(lines, i) if not line.startswith((" ", "\t")) else None
        if banner and banner[1] == 1:
            flush_block()
            flush_comments()
            group = banner[0]
            continue
        top_key = _YAML_KEY.match(line) or _YAML_COMMENTED_KEY.match(line)
        top_comment = line.startswith("#")
        if top_comment and not top_key and block and not lines[i - 1].strip() == "" \
                and _YAML_COMMENTED_NESTED.match(line):
            # "#  - module: x" right under "#providers:": the commented-out key's own value
            block.append((i + 1, line.rstrip()))
            continue
        if top_key:
            flush_block()
            key = top_key.group("key")
            block = comments + [(i + 1, line.rstrip())]
            comments = []
        elif top_comment:
            # A comment at column 0 introduces the next key (or is a note of its own).
            comments.append((i + 1, (_comment_body(line) or "").rstrip()))
        elif not line.strip():
            if comments and not block:
                flush_comments()
            elif block:
                if comments:
                    flush_comments()
                block.append((i + 1, ""))
        elif block:
            if comments:  # comments between nested lines belong to the block
                block.extend((n, t) for n, t in comments)
                comments = []
            block.append((i + 1, line.rstrip()))
        else:
            comments.append((i + 1, line.rstrip()))
    flush_block()
    flush_comments()
    drafts.sort(key=lambda d: d.lines[0][0])
    return drafts


_YAML_NESTED_COMMENTED_KEY = re.compile(r"^\s*#(?P<key>[A-Za-z_][A-Za-z0-9_.\-]*)\s*:(\s|$)")
_YAML_ANY_KEY = re.compile(r"^\s*(?:-\s+)?(?P<key>[A-Za-z_][A-Za-z0-9_.\-]*)\s*:(\s|$)")


def _block_drafts(lines: list[str], group: str, key: str,
                  block: list[tuple[int, str]]) -> list[Draft]:
    """Drafts of one top-level YAML block: cut before each indented comment paragraph, so a
    comment and the nested key it documents (``# Since synapse does not retry ...`` /
    ``restart: unless-stopped``) are a chunk of their own, titled with that key and carrying
    its key path (``services > synapse``). A piece without any comment joins the next one;
    a block without any comment gives nothing (values alone document nothing)."""
    labels = _yaml_key_paths(lines, block[0][0] - 1, block[-1][0])
    pieces: list[list[tuple[int, str]]] = [[]]
    previous_comment = False
    comment_indent = None  # indent of the current piece's first nested comment
    for n, text in block:
        raw = lines[n - 1]
        indent = len(raw) - len(raw.lstrip())
        nested_comment = raw[:1].isspace() and raw.lstrip().startswith("#")
        dedent_key = (not nested_comment and comment_indent is not None and raw.strip()
                      and indent < comment_indent and _YAML_ANY_KEY.match(raw))
        if pieces[-1] and ((nested_comment and not previous_comment) or dedent_key):
            pieces.append([])
            comment_indent = None
        if nested_comment and comment_indent is None:
            comment_indent = indent
        pieces[-1].append((n, text))
        previous_comment = nested_comment or (not raw[:1].isspace() and raw.startswith("#"))
    merged: list[list[tuple[int, str]]] = []
    carry: list[tuple[int, str]] = []
    for piece in pieces:
        if any(_comment_line(lines, n) for n, _ in piece):
            merged.append(carry + piece)
            carry = []
        else:
            carry += piece
    if carry and merged:
        merged[-1] += carry
    out = []
    # Retrieval hands a ranked key its neighbours in the same block (small-to-big).
    meta = {"block": block[0][0]} if len(merged) > 1 else {}
    for piece in merged:
        title, path = _documented_key(lines, piece, labels)
        if not title:  # the top-level key itself, or comments above plain values
            title, path = key, ""
        trail = [group, *path.split(" > ")] if path else [group]
        out.append(Draft(group, title, trail + [title], piece, meta=dict(meta),
                         part_labels=labels))
    return out


def _comment_line(lines: list[str], n: int) -> bool:
    return lines[n - 1].lstrip().startswith("#")


def _documented_key(lines: list[str], piece: list[tuple[int, str]],
                    labels: dict[int, str]) -> tuple[str, str]:
    """(key, the path of keys it is nested under) of the first key line after the piece's
    comments; ("", "") when the piece holds no key line."""
    seen_comment = False
    for n, _ in piece:
        raw = lines[n - 1]
        commented = _YAML_NESTED_COMMENTED_KEY.match(raw)
        if raw.lstrip().startswith("#") and not (commented and seen_comment):
            seen_comment = True
            continue
        match = commented or _YAML_ANY_KEY.match(raw)
        if match and seen_comment:
            return match.group("key"), labels.get(n, "")
    for n, _ in piece:  # no documented key: name the piece after where its values sit
        if not raw_is_comment(lines[n - 1]) and labels.get(n):
            path = labels[n]
            return path.rsplit(" > ", 1)[-1], path.rsplit(" > ", 1)[0] if " > " in path else ""
    return "", ""


def raw_is_comment(line: str) -> bool:
    """Whether a raw YAML line is a comment (at any indent)."""
    return line.lstrip().startswith("#")
