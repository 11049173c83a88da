"""Commands: logical units of lexed text to pipelines of commands, and their words.

Each unit is parsed with bashlex, which yields real command words, redirections, pipelines and
nested ``$(...)``/``<(...)`` substitutions. bashlex rejects plenty of real syntax (``[[ ]]``,
``case``, arithmetic, arrays), so when it fails the lexer's own tokens are grouped into
pipelines and commands instead: the scan never gives up on a unit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import bashlex

from .lexer import Token, lex

_LIST_OPS = frozenset({";", "&", "&&", "||", ";;", "(", ")", "nl"})
_PIPE_OPS = frozenset({"|", "|&"})
_REDIR_OPS = frozenset({"&>>", "<<-", "<<<", "&>", ">>", ">|", "<<", "<>", ">&", "<&", "<", ">"})


@dataclass
class Word:
    """One command word."""

    value: str  # quote-removed
    raw: str    # as written


@dataclass
class Command:
    """One simple command with its place in a pipeline."""

    words: list[Word]
    redirects: list[tuple[str, Word]]
    assignments: list[Word]
    start: int                      # offset in the scanned text
    heredoc: str | None = None
    pipeline: list["Command"] = field(default_factory=list)
    index: int = 0                  # position in its pipeline
    guard_text: str = ""            # the whole unit, for same-line guards ([ -n "$X" ] && ...)


def _units(text: str, toks: list[Token]) -> list[list[Token]]:
    """Group tokens into logical lines (a trailing pipe or && continues onto the next line)."""
    units: list[list[Token]] = []
    cur: list[Token] = []
    for tok in toks:
        if tok.kind == "nl":
            last = next((t for t in reversed(cur) if t.kind != "heredoc"), None)
            if last is not None and last.kind == "op" and last.value in ("|", "|&", "&&", "||"):
                continue
            if cur:
                units.append(cur)
                cur = []
            continue
        cur.append(tok)
    if cur:
        units.append(cur)
    return units


def _cmds_from_tokens(text: str, unit: list[Token]) -> list[list[Command]]:
    """Pipelines of commands from lexer tokens (the fallback when bashlex cannot parse)."""
    pipelines: list[list[Command]] = []
    pipeline: list[Command] = []
    cur: Command | None = None
    heredoc_owner: list[Command] = []
    k = 0

    def close_cmd():
        nonlocal cur
        if cur is not None and (cur.words or cur.redirects or cur.assignments):
            pipeline.append(cur)
        cur = None

    def close_pipeline():
        nonlocal pipeline
        close_cmd()
        if pipeline:
            pipelines.append(pipeline)
        pipeline = []

    while k < len(unit):
        tok = unit[k]
        if tok.kind == "heredoc":
            owner = heredoc_owner.pop(0) if heredoc_owner else None
            if owner is not None:
                owner.heredoc = tok.value
            k += 1
            continue
        if cur is None:
            cur = Command([], [], [], tok.start)
        if tok.kind == "op":
            if tok.value in _PIPE_OPS:
                close_cmd()
            elif tok.value in _LIST_OPS:
                close_pipeline()
            elif tok.value in _REDIR_OPS:
                target = unit[k + 1] if k + 1 < len(unit) and unit[k + 1].kind == "word" else None
                if target is not None:
                    cur.redirects.append((tok.value, Word(target.value, text[target.start:target.end])))
                    if tok.value in ("<<", "<<-"):
                        heredoc_owner.append(cur)
                    k += 1
            k += 1
            continue
        word = Word(tok.value, text[tok.start:tok.end])
        if not cur.words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=", word.raw):
            cur.assignments.append(word)
        elif not cur.words and word.raw in _KEYWORDS:
            pass
        else:
            cur.words.append(word)
        k += 1
    close_pipeline()
    return pipelines


_KEYWORDS = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until",
                       "for", "in", "case", "esac", "select", "function", "{", "}", "!",
                       "[[", "]]", "time", "coproc"})


def _cmds_from_bashlex(text: str, base: int, nodes) -> list[list[Command]]:
    """Pipelines of commands from bashlex nodes parsed from ``text[base:...]``."""
    pipelines: list[list[Command]] = []

    def word_of(node) -> Word:
        return Word(node.word, text[base + node.pos[0]:base + node.pos[1]])

    def convert(node) -> Command:
        cmd = Command([], [], [], base + node.pos[0])
        for part in node.parts:
            if part.kind == "assignment" and not cmd.words:
                cmd.assignments.append(word_of(part))
            elif part.kind in ("word", "assignment"):
                cmd.words.append(word_of(part))
                nested(part)
            elif part.kind == "redirect":
                out = part.output
                if hasattr(out, "kind") and out.kind == "word":
                    cmd.redirects.append((part.type, word_of(out)))
                    nested(out)
                if getattr(part, "heredoc", None) is not None:
                    body = part.heredoc.value
                    cmd.heredoc = body.rsplit("\n", 1)[0] if "\n" in body else ""
        return cmd

    def nested(node):
        for part in getattr(node, "parts", None) or []:
            if part.kind in ("commandsubstitution", "processsubstitution"):
                walk(part.command)
            else:
                nested(part)

    def walk(node):
        kind = node.kind
        if kind == "command":
            pipelines.append([convert(node)])
        elif kind == "pipeline":
            line: list[Command] = []
            for part in node.parts:
                if part.kind == "command":
                    line.append(convert(part))
                elif part.kind != "pipe":
                    walk(part)
            if line:
                pipelines.append(line)
        else:
            for child in (getattr(node, "parts", None) or []) + (getattr(node, "list", None) or []):
                if hasattr(child, "kind"):
                    walk(child)
            for red in getattr(node, "redirects", None) or []:
                if hasattr(red, "kind"):
                    nested(red)

    for node in nodes:
        walk(node)
    return pipelines


def pipelines(text: str) -> list[tuple[list[Token], list[list[Command]]]]:
    """Every logical unit of ``text`` with its pipelines, in source order."""
    out = []
    for unit in _units(text, lex(text)):
        start = unit[0].start
        end = max(t.end for t in unit)
        source = text[start:end]
        try:
            pipes = _cmds_from_bashlex(text, start, bashlex.parse(source))
        except Exception:  # bashlex raises many kinds on syntax it does not know
            pipes = _cmds_from_tokens(text, unit)
        for pipe in pipes:
            for idx, cmd in enumerate(pipe):
                cmd.pipeline = pipe
                cmd.index = idx
                cmd.guard_text = source
        out.append((unit, pipes))
    return out


# ───────────────────────────── words ─────────────────────────────

_PREFIX_ARITY: dict[str, dict[str, int]] = {
    "sudo": {"-u": 1, "-g": 1, "-C": 1, "-p": 1, "-r": 1, "-t": 1, "-U": 1, "-D": 1, "-R": 1,
             "-T": 1, "-h": 1},
    "doas": {"-u": 1, "-C": 1},
    "env": {"-u": 1, "-C": 1, "-S": 1},
    "nohup": {}, "command": {}, "builtin": {}, "setsid": {}, "unbuffer": {}, "exec": {"-a": 1},
    "time": {"-f": 1, "-o": 1}, "nice": {"-n": 1}, "ionice": {"-c": 1, "-n": 1, "-p": 1},
    "stdbuf": {"-i": 1, "-o": 1, "-e": 1}, "timeout": {"-s": 1, "-k": 1},
    "chronic": {}, "caffeinate": {}, "flock": {"-w": 1, "-E": 1, "--timeout": 1},
    "xargs": {"-n": 1, "-I": 1, "-L": 1, "-P": 1, "-d": 1, "-E": 1, "-s": 1, "-a": 1},
}
_TAKES_ARG_THEN_CMD = {"timeout": 1, "flock": 1}


def basename(word: str) -> str:
    """The command name without its folder (``/bin/rm`` is ``rm``)."""
    return word.rsplit("/", 1)[-1]


def strip_prefixes(words: list[Word]) -> list[Word]:
    """The command proper: ``sudo -u x env A=1 nice -n5 rm ...`` becomes ``rm ...``."""
    i = 0
    while i < len(words):
        name = basename(words[i].value)
        arity = _PREFIX_ARITY.get(name)
        if arity is None:
            break
        i += 1
        while i < len(words):
            w = words[i].value
            if w == "--":
                i += 1
                break
            if name == "env" and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w):
                i += 1
                continue
            if w.startswith("-") and len(w) > 1:
                i += 1 + arity.get(w, 0)
                continue
            break
        if name in _TAKES_ARG_THEN_CMD and i < len(words):
            if name == "flock" and any(w.value in ("-c", "--command") for w in words[:i]):
                return []
            i += _TAKES_ARG_THEN_CMD[name]
    return words[i:]


def short_flags(args: list[str]) -> set[str]:
    """Single-letter flags from ``-rf``-style words before ``--``, plus long options."""
    flags: set[str] = set()
    for a in args:
        if a == "--":
            break
        if a.startswith("--"):
            flags.add(a.split("=", 1)[0])
        elif a.startswith("-") and len(a) > 1:
            flags.update("-" + ch for ch in a[1:])
    return flags


def operands(words: list[Word]) -> list[Word]:
    """Words that are not options (everything after ``--`` is an operand)."""
    out: list[Word] = []
    seen_dd = False
    for w in words:
        if not seen_dd and w.value == "--":
            seen_dd = True
            continue
        if not seen_dd and w.value.startswith("-") and len(w.value) > 1:
            continue
        out.append(w)
    return out


def after_options(values: list[str], with_arg: set[str]) -> list[str]:
    """``values`` from the first operand on; options in ``with_arg`` take the next value."""
    i = 0
    while i < len(values) and values[i].startswith("-"):
        if values[i] == "--":
            i += 1
            break
        i += 1 + (values[i] in with_arg)
    return values[i:]
