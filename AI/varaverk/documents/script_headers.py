"""The six-section script header parser (see ../shared/header-convention.md).

Where the header is:
    - ``#`` languages (bash, sh, Perl, ...): the first contiguous block of ``#`` lines after an
      optional shebang (and blank lines after it); a bare ``#`` line continues the block, the
      first line that is not a comment ends it.
    - Python: that same ``#`` block, or the module docstring (section lines bare, bodies
      indented) when the ``#`` block holds no section.
    - PHP: the first ``/* ... */`` block after ``<?php``; the `` *`` leader is removed.

Section lines are exactly one of the six names in upper case once the comment leader and
surrounding white space are gone (a trailing colon is tolerated). Inside a section, a *named
paragraph* is a line at the section's base indent whose next line is indented deeper; its body
is the deeper-indented lines after it. A wrapped prose line is never a boundary, because its
next line is not indented deeper.

Chunks (as ``Draft`` records for ``varaverk.documents.chunking``):
    - one per named paragraph: section = the section name, title = the paragraph title, text =
      the title line then the de-indented body (``MOVER_STOP_TIMEOUT\\nSeconds to wait ...``);
    - one per run of prose in a section outside named paragraphs (title ``""``);
    - the lines before the first section (the file's one-line description, e.g. "Mirror the
      irreplaceable shares ...") are prepended to PURPOSE's lead prose chunk, created if
      PURPOSE starts with a named paragraph. That chunk is what answers "what does this job
      do", and a separate two-line chunk would mostly crowd better chunks out of the top-k.
      Without a PURPOSE section they form a chunk of their own (section ``""``, title
      ``summary``).
    - a header comment without any of the six sections (issue 6) is one chunk (section
      ``""``, title ``header comment``), whatever its length: a one-line
      ``# Backup photos to the NAS`` documents the script. Machine annotations
      (``# shellcheck disable=...``, modelines, an encoding cookie:
      ``varaverk.documents.annotations``) are not part of it;
    - any script's usage/help text is a chunk titled ``usage``, and a script without the six
      sections that comments in banners gives one chunk per banner section
      (``varaverk.documents.script_docs``: comments and documented assignments only, never
      other code); a ``#`` script (not Python or PHP) without banners gives its comment
      paragraphs that read as prose as one draft titled ``comments``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from varaverk.documents.annotations import is_annotation
from varaverk.documents.chunks import Draft
from varaverk.documents.script_docs import banner_drafts, comment_drafts, usage_drafts

SECTIONS = ("PURPOSE", "OPERATIONAL MODEL", "DESIGN PRINCIPLES", "OPERATIONAL SAFEGUARDS",
            "CONFIGURATION", "RUNTIME MODES")
_SECTION_LINE = re.compile(r"^(%s):?$" % "|".join(re.escape(s) for s in SECTIONS))
# A title is a short label with a letter or digit in it: a 12,000-character "=====" banner
# above indented text is prose, not a named paragraph.
_MAX_TITLE_CHARS = 100
_TITLE_HAS_WORD = re.compile(r"[^\W_]")
# Hanging indents that are not titles: a list item whose text wraps ("- item" / "1. item"),
# and a sentence that introduces an indented example ("For example, run this.").
_NOT_A_TITLE = re.compile(r"^([-*+\u2022]|\d+[.)])\s|[.,;]$")
SUMMARY_TITLE = "summary"
COMMENT_TITLE = "header comment"


@dataclass
class HeaderLine:
    """One line of a header comment with the comment leader removed.

    Attributes:
        number: 1-based line number in the file.
        text: the line without its leader, tabs expanded, right-stripped; "" when blank.
    """

    number: int
    text: str

    @property
    def indent(self) -> int:
        """Number of leading spaces of ``text`` (tabs are already expanded)."""
        return len(self.text) - len(self.text.lstrip(" "))

    @property
    def blank(self) -> bool:
        """True when the line holds nothing but whitespace."""
        return not self.text.strip()


def header_drafts(path: str, text: str) -> list[Draft]:
    """Chunk drafts for a script's header comment; ``[]`` when it has none worth indexing.

    Args:
        path: repository-relative path; its extension (or shebang) picks the comment syntax.
        text: the decoded, newline-normalised file.
    """
    lines = text.split("\n")
    block = find_header(path, text)
    usage = usage_drafts(path, lines)
    if any(_section_name(line) for line in block):
        return _section_drafts(block) + usage
    drafts: list[Draft] = []
    # A leading comment of any length documents its script: "# Backup photos to the NAS".
    if any(not line.blank for line in block):
        drafts.append(Draft("", COMMENT_TITLE, [COMMENT_TITLE], _dedent(block)))
    after = block[-1].number if block else 0
    banners = banner_drafts(lines, after)
    # A shell (or Perl) script explains its steps only in comments; a Python module has its
    # docstring and argparse help for readers, and its body comments annotate code.
    if not banners and _language(path, lines[0]) == "hash":
        return drafts + usage + comment_drafts(lines, after)
    return drafts + usage + banners


def find_header(path: str, text: str) -> list[HeaderLine]:
    """The header comment of a script as de-commented lines, or ``[]`` when there is none.

    For Python the ``#`` block wins when it carries a section line; otherwise the module
    docstring does when it carries one; otherwise whichever is longer is returned (the
    caller then treats it as a plain header comment).
    """
    lines = text.split("\n")
    language = _language(path, lines[0] if lines else "")
    if language == "php":
        return _php_block(lines)
    hashed = _hash_block(lines)
    if language != "python" or any(_section_name(line) for line in hashed):
        return hashed
    doc = _docstring_block(lines)
    if any(_section_name(line) for line in doc):
        return doc
    return doc if _text_lines(doc) > _text_lines(hashed) else hashed


def _language(path: str, first_line: str) -> str:
    lower = path.lower()
    if lower.endswith((".php", ".phtml")) or first_line.startswith("<?php") or (
            first_line.startswith("#!") and "php" in first_line):
        return "php"
    if lower.endswith((".py", ".pyw")) or (first_line.startswith("#!") and "python" in first_line):
        return "python"
    return "hash"


def _text_lines(block: list[HeaderLine]) -> int:
    return sum(1 for line in block if not line.blank)


def _skip_preamble(lines: list[str]) -> int:
    """Index of the first line after an optional shebang and the blank lines after it."""
    i = 1 if lines and lines[0].startswith("#!") else 0
    while i < len(lines) and not lines[i].strip():
        i += 1
    return i


def _hash_block(lines: list[str]) -> list[HeaderLine]:
    out: list[HeaderLine] = []
    i = _skip_preamble(lines)
    while i < len(lines):
        stripped = lines[i].lstrip()
        if not stripped.startswith("#"):
            break
        if is_annotation(stripped.lstrip("#")):  # "# shellcheck ...", a modeline: for tools
            i += 1
            continue
        # A run of leading '#'s is the leader, so '## PURPOSE' and '#####' banners work too.
        out.append(HeaderLine(i + 1, _clean(stripped.lstrip("#"))))
        i += 1
    return out


def _docstring_block(lines: list[str]) -> list[HeaderLine]:
    i = _skip_preamble(lines)
    # Comments (an encoding cookie, a licence line) and blank lines may precede the docstring.
    while i < len(lines) and (not lines[i].strip() or lines[i].lstrip().startswith("#")):
        i += 1
    if i >= len(lines):
        return []
    match = re.match(r'^\s*[rRuU]?("""|\'\'\')', lines[i])
    if not match:
        return []
    quote = match.group(1)
    first = lines[i][match.end():]
    out: list[HeaderLine] = []
    if quote in first:  # a one-line docstring
        return [HeaderLine(i + 1, _clean(first[:first.index(quote)]))]
    out.append(HeaderLine(i + 1, _clean(first)))
    for j in range(i + 1, len(lines)):
        line = lines[j]
        if quote in line:
            before = line[:line.index(quote)]
            if before.strip():
                out.append(HeaderLine(j + 1, _clean(before)))
            return out
        out.append(HeaderLine(j + 1, _clean(line)))
    return out  # unterminated docstring: keep what is there


def _php_block(lines: list[str]) -> list[HeaderLine]:
    i = 0
    if lines and lines[0].startswith("#!"):
        i = 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i < len(lines) and lines[i].lstrip().startswith("<?php"):
        rest = lines[i].lstrip()[len("<?php"):]
        if rest.strip():
            lines = lines[:i] + [rest] + lines[i + 1:]
        else:
            i += 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i >= len(lines) or not lines[i].lstrip().startswith("/*"):
        return []
    out: list[HeaderLine] = []
    for j in range(i, len(lines)):
        line = lines[j]
        body = line.lstrip()
        if j == i:
            body = body[2:].lstrip("*")  # "/*" or "/**"
        elif body.startswith("*") and not body.startswith("*/"):
            body = body[1:]
        elif not body.startswith("*/"):
            body = line  # a line without the " *" leader keeps its own indentation
        end = body.find("*/")
        closing = end >= 0
        if closing:
            body = body[:end]
        if body.strip() or not closing:
            out.append(HeaderLine(j + 1, _clean(body)))
        if closing:
            return out
    return out


def _clean(text: str) -> str:
    return text.expandtabs(8).rstrip()


def _section_name(line: HeaderLine) -> str | None:
    match = _SECTION_LINE.match(line.text.strip())
    return match.group(1) if match else None


def _dedent(block: list[HeaderLine]) -> list[tuple[int, str]]:
    """Numbered lines with their common indentation removed."""
    indents = [line.indent for line in block if not line.blank]
    cut = min(indents) if indents else 0
    return [(line.number, line.text[cut:] if not line.blank else "") for line in block]


def _section_drafts(block: list[HeaderLine]) -> list[Draft]:
    # Split the block at section lines: preamble lines, then (name, body lines) in order.
    preamble: list[HeaderLine] = []
    sections: list[tuple[str, list[HeaderLine]]] = []
    for line in block:
        name = _section_name(line)
        if name:
            sections.append((name, []))
        elif sections:
            sections[-1][1].append(line)
        else:
            preamble.append(line)

    while preamble and preamble[-1].blank:
        preamble.pop()
    while preamble and preamble[0].blank:
        preamble.pop(0)
    summary = _dedent(preamble)
    drafts: list[Draft] = []
    summary_used = False
    for name, body in sections:
        section_drafts = _named_paragraphs(name, body)
        if name == "PURPOSE" and summary and not summary_used:
            summary_used = True
            if section_drafts and not section_drafts[0].title:
                lead = section_drafts[0]
                lead.lines = summary + [(summary[-1][0], "")] + lead.lines
            else:
                section_drafts.insert(0, Draft(name, "", [name], list(summary)))
        drafts.extend(section_drafts)
    if summary and not summary_used:
        drafts.insert(0, Draft("", SUMMARY_TITLE, [SUMMARY_TITLE], summary))
    return drafts


def _is_title(block: list[HeaderLine], i: int, base: int) -> bool:
    """Line i opens a named paragraph: at the base indent, a short label, next line deeper."""
    line = block[i]
    if line.blank or line.indent != base or i + 1 >= len(block):
        return False
    nxt = block[i + 1]
    title = line.text.strip()
    return (not nxt.blank and nxt.indent > base and len(title) <= _MAX_TITLE_CHARS
            and bool(_TITLE_HAS_WORD.search(title)) and not _NOT_A_TITLE.search(title))


def _named_paragraphs(name: str, body: list[HeaderLine]) -> list[Draft]:
    """Drafts for one section's body: prose runs (title "") and named paragraphs."""
    texts = [line for line in body if not line.blank]
    if not texts:
        return []
    base = min(line.indent for line in texts)
    drafts: list[Draft] = []
    prose: list[HeaderLine] = []

    def flush_prose() -> None:
        if any(not line.blank for line in prose):
            drafts.append(Draft(name, "", [name], _dedent(prose)))
        prose.clear()

    i = 0
    while i < len(body):
        if not _is_title(body, i, base):
            prose.append(body[i])
            i += 1
            continue
        flush_prose()
        title_line = body[i]
        j = i + 1
        # The body runs while lines are blank or deeper than the base indent; trailing blank
        # lines are left for whatever follows.
        while j < len(body) and (body[j].blank or body[j].indent > base):
            j += 1
        while j > i + 1 and body[j - 1].blank:
            j -= 1
        title = title_line.text.strip()
        lines = [(title_line.number, title)] + _dedent(body[i + 1:j])
        drafts.append(Draft(name, title, [name, title], lines))
        i = j
    flush_prose()
    return drafts
