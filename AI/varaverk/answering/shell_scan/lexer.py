"""The quote-aware lexer: shell text to tokens, never raising.

Comments and quoted text stay data (a quoted word is one token with its quotes removed);
here-document bodies become one ``heredoc`` token placed before the newline that ends their
command's line; ``$(...)``, backticks and ``<(...)`` inside a word are recorded as spans so
that the scanner can descend into them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_OPERATORS = ("&>>", "<<-", "<<<", "&&", "||", ";;", "|&", "&>", ">>", ">|", "<<", "<>",
              ">&", "<&", ";", "&", "|", "<", ">", "(", ")")
_OP_START = set(";&|<>()")


@dataclass
class Token:
    """One lexed token, with its span in the lexed text."""

    kind: str          # "word" | "op" | "nl" | "heredoc"
    value: str         # quote-removed word, operator text, or here-document body
    start: int         # offset in the lexed text
    end: int
    subs: list[tuple[int, int]] = field(default_factory=list)  # $(...) / <(...) inner spans


def skip_balanced(text: str, i: int, open_: str, close: str) -> int:
    """Index just past the ``close`` matching the ``open_`` at ``text[i]`` (quote-aware)."""
    depth = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            j = text.find("'", i + 1)
            i = n if j < 0 else j + 1
            continue
        if c == '"':
            i = skip_double(text, i)
            continue
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def skip_double(text: str, i: int) -> int:
    """Index just past the double-quoted string opening at ``text[i]``."""
    n = len(text)
    i += 1
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == '"':
            return i + 1
        if c == "$" and text.startswith("$(", i):
            i = skip_balanced(text, i + 1, "(", ")")
            continue
        if c == "`":
            j = text.find("`", i + 1)
            i = n if j < 0 else j + 1
            continue
        i += 1
    return n


def lex(text: str) -> list[Token]:
    """Tokens of ``text``; never raises (an unterminated quote runs to the end)."""
    toks: list[Token] = []
    pending_heredocs: list[tuple[str, bool]] = []  # (delimiter, strip tabs)
    i, n = 0, len(text)
    at_word_start = True
    while i < n:
        c = text[i]
        if c == "\\" and text.startswith("\\\n", i):
            i += 2
        elif c in " \t\r":
            i += 1
            at_word_start = True
        elif c == "\n":
            i = _newline(text, i, toks, pending_heredocs)
            at_word_start = True
        elif c == "#" and at_word_start:
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c in _OP_START and not (c in "<>" and text.startswith("(", i + 1)):
            i = _operator(text, i, toks, pending_heredocs)
            at_word_start = True
        else:
            i = _word(text, i, toks)
            at_word_start = False
    return toks


def _newline(text: str, i: int, toks: list[Token],
             pending_heredocs: list[tuple[str, bool]]) -> int:
    """Append the newline at ``text[i]`` (after any here-document bodies it starts); the next index."""
    nl = Token("nl", "\n", i, i + 1)
    i += 1
    # Here-document bodies follow this newline; they belong to the line before it,
    # so their tokens go before the newline token (the span ends after the delimiter).
    for delim, strip_tabs in pending_heredocs:
        i = _heredoc(text, i, delim, strip_tabs, toks)
    pending_heredocs.clear()
    toks.append(nl)
    return i


def _heredoc(text: str, i: int, delim: str, strip_tabs: bool, toks: list[Token]) -> int:
    """Append the here-document body starting at ``text[i]``; the index past its delimiter line."""
    n = len(text)
    body_start = body_end = i
    span_end = n
    while i < n:
        j = text.find("\n", i)
        line_end = n if j < 0 else j
        line = text[i:line_end]
        if (line.lstrip("\t") if strip_tabs else line).rstrip("\r") == delim:
            span_end = line_end
            i = n if j < 0 else j + 1
            break
        body_end = line_end
        i = n if j < 0 else j + 1
    else:
        body_end = span_end = n
    toks.append(Token("heredoc", text[body_start:body_end], body_start, span_end))
    return i


def _operator(text: str, i: int, toks: list[Token],
              pending_heredocs: list[tuple[str, bool]]) -> int:
    """Append the operator at ``text[i]`` (and a here-document's delimiter word); the next index."""
    n = len(text)
    op = next(o for o in _OPERATORS if text.startswith(o, i))
    toks.append(Token("op", op, i, i + len(op)))
    i += len(op)
    if op in ("<<", "<<-"):
        # The delimiter word follows; quoting it only disables expansion in the body.
        k = i
        while k < n and text[k] in " \t":
            k += 1
        word, k2, _ = read_word(text, k)
        if word:
            pending_heredocs.append((word, op == "<<-"))
            toks.append(Token("word", word, k, k2))
            i = k2
    return i


def _word(text: str, i: int, toks: list[Token]) -> int:
    """Append the word at ``text[i]``; the next index."""
    word, j, subs = read_word(text, i)
    # A number glued to a redirection is a file descriptor, not an argument (2>/dev/null).
    if not (word.isdigit() and j < len(text) and text[j] in "<>"):
        toks.append(Token("word", word, i, j, subs))
    return j


def read_word(text: str, i: int) -> tuple[str, int, list[tuple[int, int]]]:
    """Read one shell word at ``text[i]``: (quote-removed value, end index, substitution spans)."""
    n = len(text)
    out: list[str] = []
    subs: list[tuple[int, int]] = []
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            break
        if c in _OP_START:
            if c in "<>" and text.startswith("(", i + 1):
                j = skip_balanced(text, i + 1, "(", ")")
                subs.append((i + 2, j - 1))
                out.append(text[i:j])
                i = j
                continue
            if c == "(" and out and "".join(out).endswith("="):  # arr=(a b c)
                j = skip_balanced(text, i, "(", ")")
                out.append(text[i:j])
                i = j
                continue
            break
        if c == "\\":
            if text.startswith("\\\n", i):
                i += 2
                continue
            out.append(text[i + 1:i + 2])
            i += 2
            continue
        if c == "'":
            j = text.find("'", i + 1)
            j = n if j < 0 else j
            out.append(text[i + 1:j])
            i = j + 1
            continue
        if c == '"':
            j = skip_double(text, i)
            inner = text[i + 1:j - 1] if j <= n and text[j - 1:j] == '"' else text[i + 1:j]
            for m in re.finditer(r"\$\(", inner):
                if not inner.startswith("$((", m.start()):
                    s = i + 1 + m.start() + 1
                    e = skip_balanced(text, s, "(", ")")
                    subs.append((s + 1, e - 1))
            out.append(re.sub(r'\\([\\"$`])', r"\1", inner))
            i = j
            continue
        if c == "$" and text.startswith("$(", i):
            j = skip_balanced(text, i + 1, "(", ")")
            if not text.startswith("$((", i):
                subs.append((i + 2, j - 1))
            out.append(text[i:j])
            i = j
            continue
        if c == "$" and text.startswith("${", i):
            j = skip_balanced(text, i + 1, "{", "}")
            out.append(text[i:j])
            i = j
            continue
        if c == "`":
            j = text.find("`", i + 1)
            j = n if j < 0 else j
            subs.append((i + 1, j))
            out.append(text[i:j + 1])
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out), i, subs

