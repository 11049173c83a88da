"""Where a line stands in its document: a code block (fences, org ``#+begin_src``,
indented code), front matter or an org drawer (``meta``), or prose; its YAML/JSON parents'
key words; a line's inline code spans.
"""

from __future__ import annotations

import re

from varaverk.masking.values import key_words


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


class Layout:
    """Per line: ``code`` (a code block, or any line of a non-prose kind), ``meta`` (front
    matter, org drawers) or prose; the key words of each line's YAML/JSON parents."""

    def __init__(self, lines: list[str], kind: str):
        self.prose_kind = kind in PROSE_KINDS
        self.explains = kind in EXPLAINING_KINDS
        self.mode = ["code"] * len(lines) if not self.prose_kind else self._modes(lines)
        self.lines = lines
        self._parents_of: list[frozenset[str]] | None = None

    def parents(self, number: int) -> frozenset[str]:
        """The key words of line ``number``'s YAML/JSON parents (found on first use)."""
        if self._parents_of is None:
            self._parents_of = self._parents(self.lines)
        return self._parents_of[number]

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
    def _parents(lines: list[str]) -> list[frozenset[str]]:
        out, stack = [], []  # stack: (indent, the key words of it and every level above)
        for line in lines:
            indent = len(line) - len(line.lstrip())
            if line.strip():
                while stack and stack[-1][0] >= indent:
                    stack.pop()
            above = stack[-1][1] if stack else frozenset()
            out.append(above)
            if ":" in line and (m := LEADING_KEY.match(line)):
                stack.append((indent, above.union(key_words(m.group(2)))))
        return out

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


