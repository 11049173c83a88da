"""Documentation inside scripts beyond the header comment: usage/help text and banner sections.

Scripts that do not follow the six-section convention still document themselves, in two ways
this module finds (``varaverk.documents.script_headers`` calls it; the code itself is never a
chunk):

- **Usage text** (any script): the text a ``usage()``/``help()`` shell function prints (the
  bodies of its heredocs and the strings of its ``echo``/``printf`` lines), any heredoc whose
  text starts with ``Usage:``, and for Python the ``argparse`` texts (``ArgumentParser``'s
  ``description``/``epilog``, each ``add_argument``'s option strings with its ``help``), read
  with ``ast`` so nothing is executed. One draft titled ``usage``.
- **Banner sections** (scripts without the six sections whose comments use banners, a title
  between two ruler lines such as ``####...`` / ``# get an access token`` / ``####...``, or
  ``# ── Name ──``): each banner opens a section titled with its name, holding the comment
  lines under it (commented-out example lines included) and the variable assignments that a
  comment line directly introduces (``# choose a time ...`` / ``TIME='12 months ago'``: a
  documented setting, as in a configuration template). Other code lines are left out.
- **Comment paragraphs** (shell or Perl scripts without the six sections or banners): the
  runs of comment lines in the body whose first line reads as prose (``# Looping through all
  of the deployed resources during 5 minutes with 10 seconds intervals``), each with the
  assignment it directly introduces, together in one draft titled ``comments``. A run that
  starts like code (``# TIME='2016-08-31'``) or with a word or two (``# for postgres:``) is
  left out: it names a step for the eye and documents nothing.
"""

from __future__ import annotations

import ast
import re
import warnings

from varaverk.documents.annotations import is_annotation
from varaverk.documents.chunks import Draft, framed_name, reads_as_prose, trim_blank_lines

USAGE_TITLE = "usage"
COMMENTS_TITLE = "comments"
_USAGE_FUNC = re.compile(r"^\s*(?:function\s+)?(?:show_|print_|_)?(?:usage|help)\s*"
                         r"(?:\(\s*\))?\s*\{?\s*$")
_HEREDOC = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z_]\w*)\2")
_ECHO = re.compile(r"""^\s*(?:echo|printf)(?:\s+-[a-zA-Z]+)*\s+(["'])(?P<text>.*)\1""")
_ASSIGN = re.compile(r"^\s*(?:export\s+|readonly\s+|local\s+|declare(?:\s+-\w+)*\s+)?"
                     r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
_RULER = re.compile(r"^[#=\-~*_+─━═]{6,}$")
_BANNER_CHARS = "─━═=-~*"  # an inline banner: # ── name ── (see framed_name)

Numbered = list[tuple[int, str]]


def usage_drafts(path: str, lines: list[str]) -> list[Draft]:
    """The usage/help text of a script as one draft titled ``usage`` ([] when none)."""
    if path.lower().endswith((".py", ".pyw")) or (lines and lines[0].startswith("#!")
                                                   and "python" in lines[0]):
        found = _argparse_text(lines)
    else:
        found = _shell_usage(lines)
    if not any(t.strip() for _, t in found):
        return []
    return [Draft("", USAGE_TITLE, [USAGE_TITLE], found)]


def _shell_usage(lines: list[str]) -> Numbered:
    out: Numbered = []
    i = 0
    while i < len(lines):
        if _USAGE_FUNC.match(lines[i]):
            end = _function_end(lines, i)
            out += _printed_text(lines, i + 1, end)
            i = end + 1
            continue
        doc = _HEREDOC.search(lines[i])
        if doc:
            body, end = _heredoc(lines, i, doc)
            first = next((t for _, t in body if t.strip()), "")
            if first.strip().lower().startswith("usage"):
                out += body
            i = end + 1
            continue
        i += 1
    return out


def _function_end(lines: list[str], start: int) -> int:
    """Index of the line closing the shell function opened at ``start`` (a ``}`` at the
    function's own indent, else the end of the file)."""
    indent = len(lines[start]) - len(lines[start].lstrip())
    for j in range(start + 1, len(lines)):
        line = lines[j]
        if line.strip() == "}" and len(line) - len(line.lstrip()) <= indent:
            return j
    return len(lines) - 1


def _heredoc(lines: list[str], i: int, match: re.Match) -> tuple[Numbered, int]:
    """The body of the heredoc opened on line i and the index of its terminator line."""
    strip_tabs, word = match.group(1) == "-", match.group(3)
    body: Numbered = []
    for j in range(i + 1, len(lines)):
        text = lines[j].lstrip("\t") if strip_tabs else lines[j]
        if text.strip() == word:
            return body, j
        body.append((j + 1, text.rstrip()))
    return body, len(lines) - 1


def _printed_text(lines: list[str], start: int, end: int) -> Numbered:
    """What the lines start..end-1 of a shell function print: heredoc bodies, echo strings."""
    out: Numbered = []
    i = start
    while i < end:
        doc = _HEREDOC.search(lines[i])
        if doc:
            body, stop = _heredoc(lines, i, doc)
            out += body
            i = stop + 1
            continue
        echo = _ECHO.match(lines[i])
        if echo:
            out.append((i + 1, echo.group("text").replace("\\n", "").replace("\\t", "  ")))
        i += 1
    return out


def _argparse_text(lines: list[str]) -> Numbered:
    """``ArgumentParser`` description/epilog and ``add_argument`` flags with their help."""
    try:
        with warnings.catch_warnings():
            # "invalid escape sequence" and the like: the user's code, not ai-index's output.
            warnings.simplefilter("ignore")
            tree = ast.parse("\n".join(lines))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        # Not Python we can read (or nested past the parser's limits): no usage, the header
        # comment is still read.
        return []
    out: Numbered = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "attr", getattr(node.func, "id", ""))
        if name in ("ArgumentParser", "add_parser"):
            for kw in node.keywords:
                if kw.arg in ("description", "epilog", "help") and _literal(kw.value):
                    out += [(node.lineno, t) for t in _literal(kw.value).splitlines()]
        elif name == "add_argument":
            flags = [a.value for a in node.args if isinstance(a, ast.Constant)
                     and isinstance(a.value, str)]
            helps = [_literal(kw.value) for kw in node.keywords if kw.arg == "help"]
            if flags and helps and helps[0]:
                out.append((node.lineno, f"{', '.join(flags)}: {' '.join(helps[0].split())}"))
    out.sort(key=lambda x: x[0])
    return out


def _literal(node) -> str:
    """The text of a string constant (implicitly joined literals included), else ""."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):  # an f-string: keep its literal parts
        return "".join(v.value for v in node.values
                       if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return ""


# ---------------------------------------------------------------------------------------------
# Banner sections
# ---------------------------------------------------------------------------------------------

def _comment_text(line: str) -> str | None:
    stripped = line.strip()
    if not stripped.startswith("#") or stripped.startswith("#!"):
        return None
    body = stripped.lstrip("#")
    if is_annotation(body):  # "# shellcheck disable=...": for a tool, not a reader
        return None
    return body[1:] if body.startswith(" ") else body


def banner_at(lines: list[str], i: int) -> tuple[str, int] | None:
    """(banner name, lines it takes) when a comment banner starts at line i, else None:
    a ruler / ``# name`` / ruler triple, or one ``# ── name ──`` line."""
    line = lines[i].strip()
    inline = framed_name(line.lstrip("#"), _BANNER_CHARS, need_word=False) \
        if line.startswith("#") else None
    if inline is not None:
        return inline, 1
    if not _RULER.match(line) or not line.startswith("#") or i + 2 >= len(lines):
        return None
    name = _comment_text(lines[i + 1])
    closing = lines[i + 2].strip()
    if name and name.strip() and not _RULER.match(lines[i + 1].strip()) \
            and _RULER.match(closing):
        return name.strip(), 3
    return None


def banner_drafts(lines: list[str], start: int) -> list[Draft]:
    """One draft per banner section after line ``start`` (0-based), for scripts that use
    banners; [] when no banner follows. Text before the first banner forms a section titled
    ``""`` when it holds comments."""
    if not any(banner_at(lines, i) for i in range(start, len(lines))):
        return []
    drafts: list[Draft] = []
    title, body = "", []
    i = start
    while i < len(lines):
        banner = banner_at(lines, i)
        if banner:
            _add_section(drafts, title, body)
            title, body = banner[0], []
            i += banner[1]
            continue
        i = _take_line(lines, i, body)
    _add_section(drafts, title, body)
    return drafts


def _take_line(lines: list[str], i: int, body: Numbered) -> int:
    """Add line i to a section body when it is a comment, or a documented assignment (the
    line before it is a comment; an open ``(`` array runs to its ``)``). Returns the next
    line index."""
    comment = _comment_text(lines[i])
    if comment is not None:
        body.append((i + 1, comment.rstrip()))
        return i + 1
    previous = _comment_text(lines[i - 1]) if i else None
    # Only top-level assignments: an indented one is inside a loop or function (code).
    if previous is not None and previous.strip() and _ASSIGN.match(lines[i]) \
            and not lines[i][:1].isspace():
        end = i
        if lines[i].rstrip().endswith("(") or lines[i].rstrip().endswith("\\"):
            while end + 1 < len(lines) and not lines[end].rstrip().endswith(")") \
                    and end - i < 50:
                end += 1
        body.extend((n + 1, lines[n].rstrip()) for n in range(i, end + 1))
        return end + 1
    if not lines[i].strip() and body and body[-1][1]:
        body.append((i + 1, ""))
    return i + 1


# ---------------------------------------------------------------------------------------------
# Comment paragraphs
# ---------------------------------------------------------------------------------------------

# A comment line reads as prose from three words on: a step named in a word or two ("# for
# postgres:") names it for the eye and documents nothing.
_PROSE_WORDS = 3


def comment_drafts(lines: list[str], start: int) -> list[Draft]:
    """The comment paragraphs after line ``start`` (0-based) whose first line reads as prose,
    in order, as one draft titled ``COMMENTS_TITLE`` ([] when there is none): the script's
    own account of its steps, kept together as its header comment is."""
    body: Numbered = []
    i = start
    while i < len(lines):
        if _comment_text(lines[i]) is None:
            i += 1
            continue
        paragraph: Numbered = []
        while i < len(lines) and (comment := _comment_text(lines[i])) is not None:
            paragraph.append((i + 1, comment.rstrip()))
            i += 1
        paragraph = trim_blank_lines(paragraph)
        if not paragraph or not reads_as_prose(paragraph[0][1], _PROSE_WORDS):
            continue
        if i < len(lines):  # the assignment the paragraph introduces, if the line is one
            i = _take_line(lines, i, paragraph)
        if body:
            body.append((paragraph[0][0] - 1, ""))
        body += trim_blank_lines(paragraph)
    return [Draft("", COMMENTS_TITLE, [COMMENTS_TITLE], body)] if body else []


def _add_section(drafts: list[Draft], title: str, body: Numbered) -> None:
    if any(t.strip() for _, t in body):
        drafts.append(Draft("", title, [title] if title else [], body))
