"""Destructive-shell scanner: finds commands that can wipe data, disks or a host.

Used by the ``code`` profile on every answer it drafts (each finding is shown beside the
snippet) and by operators through ``ai-scan-shell``. ``scan(text)`` accepts plain shell or a
whole Markdown answer, in which case every ```bash/sh/shell/zsh/console or untagged fenced
block (and indented code block) is scanned and findings carry the answer's line numbers.

How a snippet is read:
  1. A quote-aware lexer splits the text into logical units (one command line, with backslash
     continuations, trailing ``|``/``&&``/``||`` and here-document bodies joined in). Comments
     and quoted text are data, never commands, so ``echo "rm -rf /"`` and ``# rm -rf /`` are
     benign.
  2. Each unit is parsed with bashlex, which yields real command words, redirections,
     pipelines and nested ``$(...)``/``<(...)`` substitutions. bashlex rejects plenty of real
     syntax (``[[ ]]``, ``case``, arithmetic, arrays), so when it fails the lexer's own tokens
     are grouped into pipelines and commands instead: the scan never gives up on a unit.
  3. Each command (after ``sudo``/``env``/``nohup``/... prefixes) goes through the rules
     below; strings run by ``bash -c``, ``ssh host CMD``, ``eval``, ``echo ... | sh`` and
     here-documents fed to a shell are scanned recursively.

Variables: literal assignments earlier in the text are substituted (``DIR=/mnt/user`` then
``rm -rf "$DIR"`` is a finding); ``${DIR:?}``, ``${DIR:-x}`` and an earlier ``: "${DIR:?}"``
count as guards. A recursive delete whose path collapses onto a root when an unguarded
variable is empty (``rm -rf "$DIR/"*`` becomes ``rm -rf /*``) is a finding, and so is any
unquoted variable as a recursive-delete target.

The scanner errs towards a finding: a false alarm costs a glance, a miss can cost an array.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import asdict, dataclass, field

import bashlex

__all__ = ["Finding", "scan", "scan_shell", "extract_shell_blocks", "SHELL_FENCE_LANGUAGES"]


@dataclass(frozen=True)
class Finding:
    """One destructive command.

    Attributes:
        line: 1-based line in the scanned text (for Markdown, the answer's own line).
        reason: why it is destructive, in one sentence an operator can act on.
        snippet: the source line of the command (stripped, at most 200 characters).
        rule: a short stable rule id (``rm-root``, ``dd-device``, ...), for tests and filters.
    """

    line: int
    reason: str
    snippet: str
    rule: str = ""

    def to_dict(self) -> dict:
        """A JSON-ready dict: ``{"line", "reason", "snippet", "rule"}``."""
        return asdict(self)


# Fence info strings whose block is shell. Untagged fences count too: models often omit the tag.
SHELL_FENCE_LANGUAGES = frozenset({"", "bash", "sh", "shell", "zsh", "ksh", "dash", "ash",
                                   "console", "shell-session", "shellsession", "bash-session",
                                   "sh-session", "terminal", "shellscript", "bashrc"})
_PROMPTED = frozenset({"console", "shell-session", "shellsession", "bash-session",
                       "sh-session", "terminal"})
_MAX_DEPTH = 4  # nesting of bash -c / ssh / eval strings scanned recursively

# ───────────────────────────── lexer ─────────────────────────────

_OPERATORS = ("&>>", "<<-", "<<<", "&&", "||", ";;", "|&", "&>", ">>", ">|", "<<", "<>",
              ">&", "<&", ";", "&", "|", "<", ">", "(", ")")
_OP_START = set(";&|<>()")
_LIST_OPS = frozenset({";", "&", "&&", "||", ";;", "(", ")", "nl"})
_PIPE_OPS = frozenset({"|", "|&"})
_REDIR_OPS = frozenset({"&>>", "<<-", "<<<", "&>", ">>", ">|", "<<", "<>", ">&", "<&", "<", ">"})


@dataclass
class _Tok:
    kind: str          # "word" | "op" | "nl" | "heredoc"
    value: str         # quote-removed word, operator text, or here-document body
    start: int         # offset in the lexed text
    end: int
    subs: list[tuple[int, int]] = field(default_factory=list)  # $(...) / <(...) inner spans


def _skip_balanced(text: str, i: int, open_: str, close: str) -> int:
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
            i = _skip_double(text, i)
            continue
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def _skip_double(text: str, i: int) -> int:
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
            i = _skip_balanced(text, i + 1, "(", ")")
            continue
        if c == "`":
            j = text.find("`", i + 1)
            i = n if j < 0 else j + 1
            continue
        i += 1
    return n


def _lex(text: str) -> list[_Tok]:
    """Tokens of ``text``; never raises (an unterminated quote runs to the end)."""
    toks: list[_Tok] = []
    pending_heredocs: list[tuple[str, bool]] = []  # (delimiter, strip tabs)
    i, n = 0, len(text)
    at_word_start = True
    while i < n:
        c = text[i]
        if c == "\\" and text.startswith("\\\n", i):
            i += 2
            continue
        if c in " \t\r":
            i += 1
            at_word_start = True
            continue
        if c == "\n":
            nl = _Tok("nl", "\n", i, i + 1)
            i += 1
            at_word_start = True
            # Here-document bodies follow this newline; they belong to the line before it,
            # so their tokens go before the newline token (the span ends after the delimiter).
            for delim, strip_tabs in pending_heredocs:
                body_start = i
                body_end = i
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
                toks.append(_Tok("heredoc", text[body_start:body_end], body_start, span_end))
            pending_heredocs.clear()
            toks.append(nl)
            continue
        if c == "#" and at_word_start:
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if c in _OP_START and not (c in "<>" and text.startswith("(", i + 1)):
            op = next(o for o in _OPERATORS if text.startswith(o, i))
            toks.append(_Tok("op", op, i, i + len(op)))
            i += len(op)
            at_word_start = True
            if op in ("<<", "<<-"):
                # The delimiter word follows; quoting it only disables expansion in the body.
                k = i
                while k < n and text[k] in " \t":
                    k += 1
                word, k2, _ = _read_word(text, k)
                if word:
                    pending_heredocs.append((word, op == "<<-"))
                    toks.append(_Tok("word", word, k, k2))
                    i = k2
            continue
        word, j, subs = _read_word(text, i)
        # A number glued to a redirection is a file descriptor, not an argument (2>/dev/null).
        if word.isdigit() and j < n and text[j] in "<>":
            i = j
            continue
        toks.append(_Tok("word", word, i, j, subs))
        i = j
        at_word_start = False
    return toks


def _read_word(text: str, i: int) -> tuple[str, int, list[tuple[int, int]]]:
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
                j = _skip_balanced(text, i + 1, "(", ")")
                subs.append((i + 2, j - 1))
                out.append(text[i:j])
                i = j
                continue
            if c == "(" and out and "".join(out).endswith("="):  # arr=(a b c)
                j = _skip_balanced(text, i, "(", ")")
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
            j = _skip_double(text, i)
            inner = text[i + 1:j - 1] if j <= n and text[j - 1:j] == '"' else text[i + 1:j]
            for m in re.finditer(r"\$\(", inner):
                if not inner.startswith("$((", m.start()):
                    s = i + 1 + m.start() + 1
                    e = _skip_balanced(text, s, "(", ")")
                    subs.append((s + 1, e - 1))
            out.append(re.sub(r'\\([\\"$`])', r"\1", inner))
            i = j
            continue
        if c == "$" and text.startswith("$(", i):
            j = _skip_balanced(text, i + 1, "(", ")")
            if not text.startswith("$((", i):
                subs.append((i + 2, j - 1))
            out.append(text[i:j])
            i = j
            continue
        if c == "$" and text.startswith("${", i):
            j = _skip_balanced(text, i + 1, "{", "}")
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


# ───────────────────────────── commands ─────────────────────────────

@dataclass
class _Word:
    value: str  # quote-removed
    raw: str    # as written


@dataclass
class _Cmd:
    words: list[_Word]
    redirects: list[tuple[str, _Word]]
    assignments: list[_Word]
    start: int                      # offset in the scanned text
    heredoc: str | None = None
    pipeline: list["_Cmd"] = field(default_factory=list)
    index: int = 0                  # position in its pipeline
    guard_text: str = ""            # the whole unit, for same-line guards ([ -n "$X" ] && ...)


def _units(text: str, toks: list[_Tok]) -> list[list[_Tok]]:
    """Group tokens into logical lines (a trailing pipe or && continues onto the next line)."""
    units: list[list[_Tok]] = []
    cur: list[_Tok] = []
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


def _cmds_from_tokens(text: str, unit: list[_Tok]) -> list[list[_Cmd]]:
    """Pipelines of commands from lexer tokens (the fallback when bashlex cannot parse)."""
    pipelines: list[list[_Cmd]] = []
    pipeline: list[_Cmd] = []
    cur: _Cmd | None = None
    heredoc_owner: list[_Cmd] = []
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
            cur = _Cmd([], [], [], tok.start)
        if tok.kind == "op":
            if tok.value in _PIPE_OPS:
                close_cmd()
            elif tok.value in _LIST_OPS:
                close_pipeline()
            elif tok.value in _REDIR_OPS:
                target = unit[k + 1] if k + 1 < len(unit) and unit[k + 1].kind == "word" else None
                if target is not None:
                    cur.redirects.append((tok.value, _Word(target.value, text[target.start:target.end])))
                    if tok.value in ("<<", "<<-"):
                        heredoc_owner.append(cur)
                    k += 1
            k += 1
            continue
        word = _Word(tok.value, text[tok.start:tok.end])
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


def _cmds_from_bashlex(text: str, base: int, nodes) -> list[list[_Cmd]]:
    """Pipelines of commands from bashlex nodes parsed from ``text[base:...]``."""
    pipelines: list[list[_Cmd]] = []

    def word_of(node) -> _Word:
        return _Word(node.word, text[base + node.pos[0]:base + node.pos[1]])

    def convert(node) -> _Cmd:
        cmd = _Cmd([], [], [], base + node.pos[0])
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
            line: list[_Cmd] = []
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


def _pipelines(text: str) -> list[tuple[list[_Tok], list[list[_Cmd]]]]:
    """Every logical unit of ``text`` with its pipelines, in source order."""
    out = []
    for unit in _units(text, _lex(text)):
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


# ───────────────────────────── variables and paths ─────────────────────────────

_UNKNOWN, _NONEMPTY = "\x00unknown", "\x00nonempty"
_PARAM_RE = re.compile(r"\$(?:\{(?P<braced>[^}]*)\}|(?P<name>[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]))")


@dataclass
class _Resolved:
    full: str                   # the path with known values; unknown values as \x01NAME\x01
    empty_case: str             # the path when every possibly-empty variable is empty
    maybe_empty: list[str]      # unguarded variables that may be empty
    unquoted: list[str]         # variables expanded without quotes (word splitting, globbing)


def _param_state(expr: str, env: dict[str, str]) -> tuple[str, str, str]:
    """(name, replacement, state) for the inside of ``${...}`` or a bare name.

    state: "known" (replacement is the literal value), "nonempty" or "maybe" (may be empty).
    """
    m = re.match(r"^#?([A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-])(.*)$", expr, re.S)
    if not m:
        return expr, "\x01?\x01", "maybe"
    name, op = m.group(1), m.group(2)
    if expr.startswith("#") and len(expr) > 1:
        return name, "0", "known"
    if name == "HOME":
        return name, "~", "known"
    if name in ("PWD",):
        return name, "\x01PWD\x01", "nonempty"
    if op.startswith((":?", ":-", ":=")):
        default = op[2:]
        if op.startswith(":?") or default:
            return name, f"\x01{name}\x01", "nonempty"
    state = env.get(name)
    if state is None or state == _UNKNOWN:
        return name, f"\x01{name}\x01", "maybe"
    if state == _NONEMPTY:
        return name, f"\x01{name}\x01", "nonempty"
    if op:  # ${X%/} and friends on a known value: treat as nonempty, value unknown
        return name, f"\x01{name}\x01", "nonempty"
    return name, state, "known"


def _resolve(raw: str, env: dict[str, str]) -> _Resolved:
    """Expand a word as written (``raw``) against what is known of its variables."""
    full: list[str] = []
    empty: list[str] = []
    maybe: list[str] = []
    unquoted: list[str] = []
    i, n = 0, len(raw)
    quote = ""
    if raw.startswith("~"):
        m = re.match(r"~[A-Za-z0-9_.-]*", raw)
        tilde = m.group(0)
        full.append("~" if tilde == "~" else tilde)
        empty.append(full[-1])
        i = len(tilde)
    while i < n:
        c = raw[i]
        if quote != "'" and c == "\\" and i + 1 < n:
            full.append(raw[i + 1])
            empty.append(raw[i + 1])
            i += 2
            continue
        if c in "'\"" and (not quote or quote == c):
            quote = "" if quote else c
            i += 1
            continue
        if c == "$" and quote != "'":
            if raw.startswith("$(", i):
                j = _skip_balanced(raw, i + 1, "(", ")")
                full.append("\x01$()\x01")
                maybe.append(raw[i:j])
                if not quote:
                    unquoted.append(raw[i:j])
                i = j
                continue
            m = _PARAM_RE.match(raw, i)
            if m:
                name, value, state = _param_state(m.group("braced") or m.group("name") or "", env)
                full.append(value)
                if state == "maybe":
                    maybe.append(name)
                    if not quote:
                        unquoted.append(name)
                else:
                    empty.append(value)
                i = m.end()
                continue
        if c == "`" and quote != "'":
            j = raw.find("`", i + 1)
            j = n if j < 0 else j + 1
            full.append("\x01``\x01")
            maybe.append(raw[i:j])
            if not quote:
                unquoted.append(raw[i:j])
            i = j
            continue
        full.append(c)
        empty.append(c)
        i += 1
    return _Resolved("".join(full), "".join(empty), maybe, unquoted)


_SYSTEM_TOP = ("bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "media",
               "mnt", "opt", "proc", "root", "run", "sbin", "srv", "sys", "usr", "var", "snap",
               "nix", "data", "storage")
# (pattern, description, system): "system" roots are also protected from recursive
# chmod/chown; the others are data (a share, a home, a service's data) where a recursive
# permission fix is routine but a recursive delete is not.
_ROOT_RULES: tuple[tuple[re.Pattern, str, bool], ...] = (
    (re.compile(r"^/$"), "the root filesystem /", True),
    (re.compile(r"^~[A-Za-z0-9_.-]*$"), "a home directory ({0})", False),
    (re.compile(r"^/home/[^/]+$"), "the home directory {0}", False),
    (re.compile(r"^/mnt/(user0?|disk\d+|cache|disks|remotes|addons|rootshare|[^/]*pool[^/]*)"
                r"/[^/]+$"), "the whole share or disk {0}", False),
    (re.compile(r"^/mnt/[^/]+$"), "the array or mount root {0}", True),
    (re.compile(r"^/boot/[^/]+$"), "the boot or flash folder {0}", False),
    (re.compile(r"^/usr/[^/]+$|^/usr/local/[^/]+$"), "the system directory {0}", True),
    (re.compile(r"^/var/(lib|log|spool|mail|www|backups|opt)$"), "the system directory {0}", True),
    (re.compile(r"^/var/lib/[^/]+$"), "the service data directory {0}", False),
    (re.compile(r"^/etc/[^/]+$"), "the configuration {0}", False),
    (re.compile(r"^/(" + "|".join(_SYSTEM_TOP) + r")$"), "the system directory {0}", True),
    # Any other top-level folder (a pool mounted at /tank, Synology's /volume1) except /tmp.
    (re.compile(r"^/(?!tmp$)[^/]+$"), "the top-level folder {0}", False),
)
_GLOB_CHARS = re.compile(r"[*?\[]")


def _normalise(path: str) -> str:
    """``path`` without a trailing ``/``, ``/*``, ``/.*`` or ``/.`` (the folder itself)."""
    p = re.sub(r"/{2,}", "/", path)
    while True:
        stripped = re.sub(r"(/\.?\*|/\.\[!\.\]\*|/\{\*,\.\*\}|/\.)$", "", p)
        if stripped != p:
            p = stripped or "/"
        elif len(p) > 1 and p.endswith("/"):
            p = p[:-1]
        else:
            break
    if p.startswith("/"):
        p = posixpath.normpath(p)  # /./etc, /var/../ and friends
        if p.startswith("//"):
            p = "/" + p.lstrip("/")
    return p


def _root_kind(path: str, system_only: bool = False) -> str | None:
    """A description when ``path`` (possibly a glob) is a root worth protecting, else None.

    ``system_only`` keeps only the system roots (for recursive chmod/chown).
    """
    if not path:
        return None
    p = _normalise(path)
    if p.startswith("~"):
        if "/" in p or system_only:
            return None
        return f"a home directory ({p})"
    if not p.startswith("/"):
        return None
    if "\x01" in p:  # an unknown but non-empty value: not a root we can name
        return None
    probe = p
    if _GLOB_CHARS.search(p):
        comps = p.split("/")
        if len(comps) > 1 and _GLOB_CHARS.search(comps[1]):
            return f"every top-level folder ({p})"
        probe = "/".join(re.sub(r"\[[^\]]*\]|[*?]", "1", c) for c in comps)
    for pattern, desc, system in _ROOT_RULES:
        if pattern.match(probe):
            return desc.format(p) if system or not system_only else None
    return None


# ───────────────────────────── rules ─────────────────────────────

_BLOCK_DEVICE = re.compile(
    r"^/dev/(sd[a-z]+\d*|hd[a-z]+\d*|vd[a-z]+\d*|xvd[a-z]+\d*|nvme\d+n\d+(p\d+)?|"
    r"mmcblk\d+(p\d+)?|md\d+(p\d+)?|md/.+|dm-\d+|mapper/.+|disk/.+|loop\d+|nbd\d+|zd\d+|"
    r"bcache\d+|rbd\d+|sr\d+|[^/]*\x01.*)$")
_SAFE_DEV = re.compile(r"^/dev/(null|zero|stdout|stderr|stdin|tty\w*|pts/.*|fd/.*|shm/.*|urandom|random)$")
_SYSTEM_FILE_DIRS = re.compile(r"^/(etc|boot|usr|bin|sbin|lib|lib32|lib64|var/lib|root)(/|$)")
_CRITICAL_FILES = re.compile(r"^/etc/(passwd|shadow|group|gshadow|sudoers|fstab|crypttab|"
                             r"default/grub|ssh/sshd_config)$|^/boot/")
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "fish", "busybox"})
_INTERPRETERS = _SHELLS | {"python", "python2", "python3", "perl", "ruby", "node", "php"}
_DOWNLOADERS = frozenset({"curl", "wget", "fetch", "http", "https", "lynx", "aria2c"})
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


def _basename(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _strip_prefixes(words: list[_Word]) -> list[_Word]:
    """The command proper: ``sudo -u x env A=1 nice -n5 rm ...`` becomes ``rm ...``."""
    i = 0
    while i < len(words):
        name = _basename(words[i].value)
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


def _short_flags(args: list[str]) -> set[str]:
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


def _operands(words: list[_Word]) -> list[_Word]:
    """Words that are not options (everything after ``--`` is an operand)."""
    out: list[_Word] = []
    seen_dd = False
    for w in words:
        if not seen_dd and w.value == "--":
            seen_dd = True
            continue
        if not seen_dd and w.value.startswith("-") and len(w.value) > 1:
            continue
        out.append(w)
    return out


class _Scanner:
    """Walks commands in order, keeping what is known about variables."""

    def __init__(self) -> None:
        self.env: dict[str, str] = {}
        self.cwd: str | None = None  # known only after a cd to a literal path
        self.findings: list[Finding] = []

    # -- entry ------------------------------------------------------------------------
    def scan_text(self, text: str, line_of, depth: int = 0, via: str = "") -> None:
        """Scan shell ``text``; ``line_of(offset)`` maps an offset to the reported line."""
        if depth > _MAX_DEPTH:
            return
        for unit, pipes in _pipelines(text):
            self._fork_bomb(text, unit, line_of, via)
            for pipe in pipes:
                for cmd in pipe:
                    self._command(text, cmd, line_of, depth, via)
            self._nested_from_tokens(text, unit, pipes, line_of, depth, via)

    def _nested_from_tokens(self, text, unit, pipes, line_of, depth, via) -> None:
        # The token fallback does not descend into $(...) on its own; bashlex does. A span
        # that already holds a parsed command was handled, so findings stay single.
        starts = [cmd.start for pipe in pipes for cmd in pipe]
        for tok in unit:
            for s, e in tok.subs:
                if any(s <= start < e for start in starts):
                    continue
                inner = text[s:e]
                self.scan_text(inner, lambda off, s=s: line_of(s + off), depth + 1, via)

    def _add(self, line: int, reason: str, snippet: str, rule: str, via: str) -> None:
        if via:
            reason = f"{reason} (inside {via})"
        snippet = snippet.strip()
        if len(snippet) > 200:
            snippet = snippet[:197] + "..."
        finding = Finding(line, reason, snippet, rule)
        if finding not in self.findings:
            self.findings.append(finding)

    def _fork_bomb(self, text: str, unit: list[_Tok], line_of, via: str) -> None:
        # Quoted words become a placeholder: a fork bomb inside a string is only text.
        skeleton = " ".join(
            t.value if t.kind == "op" else
            ("_" if re.search(r"['\"\\]", text[t.start:t.end]) else text[t.start:t.end])
            for t in unit if t.kind in ("word", "op"))
        m = (re.search(r"(\S+)\s*\(\s*\)\s*\{\s*\1\s*\|\s*&?\s*\1\s*&", skeleton)
             or re.search(r"\bfunction\s+(\S+)\s*(\(\s*\))?\s*\{\s*\1\s*\|\s*&?\s*\1\s*&",
                          skeleton))
        if m:
            self._add(line_of(unit[0].start), "fork bomb: a function that pipes into itself in "
                      "the background until the host runs out of processes",
                      self._line_text(text, unit[0].start), "fork-bomb", via)

    @staticmethod
    def _line_text(text: str, offset: int) -> str:
        start = text.rfind("\n", 0, offset) + 1
        end = text.find("\n", offset)
        return text[start:end if end >= 0 else len(text)]

    # -- one command ------------------------------------------------------------------
    def _command(self, text: str, cmd: _Cmd, line_of, depth: int, via: str) -> None:
        line = line_of(cmd.start)
        snippet = self._line_text(text, cmd.start)

        def add(reason: str, rule: str) -> None:
            self._add(line, reason, snippet, rule, via)

        for a in cmd.assignments:
            self._assign(a.raw)
        words = _strip_prefixes(cmd.words)
        for op, target in cmd.redirects:
            self._redirect(cmd, words, op, target, add)
        if not words:
            return
        name = _basename(words[0].value)
        args = words[1:]
        values = [w.value for w in args]
        if name in ("export", "local", "readonly", "declare", "typeset"):
            for w in args:
                if "=" in w.raw:
                    self._assign(w.raw)
            return
        # Later uses of a variable guarded with ${X:?} anywhere are guarded too.
        for w in words:
            for m in re.finditer(r"\$\{([A-Za-z_][A-Za-z0-9_]*):[?=]", w.raw):
                if self.env.get(m.group(1)) in (None, _UNKNOWN):
                    self.env[m.group(1)] = _NONEMPTY
        if name in ("for", "read"):
            return
        if name in ("cd", "pushd"):
            self._change_dir(args)
            return
        checker = getattr(self, "_rule_" + re.sub(r"[^a-z0-9]", "_", name.lower()), None)
        if name.startswith(("mkfs", "mke2fs")) or name in ("mkswap", "mkdosfs", "mkntfs",
                                                             "mkexfatfs", "mkreiserfs"):
            checker = self._rule_mkfs
        elif re.fullmatch(r"python[0-9.]*", name):
            checker = None
        if checker is not None:
            checker(cmd, name, args, values, add)
        self._pipe_into_interpreter(text, cmd, words, name, args, line_of, depth, via, add)
        self._nested_strings(text, cmd, name, args, values, line_of, depth, via)

    def _change_dir(self, args: list[_Word]) -> None:
        operands = [w for w in args if not (w.value.startswith("-") and len(w.value) > 1)]
        target = _resolve(operands[0].raw, self.env).full if operands else "~"
        if "\x01" in target or target == "-":
            self.cwd = None
        elif target.startswith(("/", "~")):
            self.cwd = target
        elif self.cwd is not None:
            self.cwd = posixpath.join(self.cwd, target)

    def _in_cwd(self, path: str) -> str:
        """``path`` made absolute against a known working directory (else unchanged)."""
        if self.cwd is None or not path or path.startswith(("/", "~", "\x01")):
            return path
        return posixpath.join(self.cwd, path)

    def _assign(self, raw: str) -> None:
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)(\[[^]]*\])?\+?=(.*)$", raw, re.S)
        if not m:
            return
        name, value = m.group(1), m.group(3)
        if m.group(2) or raw[len(name):].startswith("+="):
            self.env[name] = _UNKNOWN
            return
        resolved = _resolve(value, self.env)
        if re.search(r"\$\{[A-Za-z_][A-Za-z0-9_]*:[?=]|\$\{[A-Za-z_][A-Za-z0-9_]*:-[^}]", value):
            self.env[name] = _NONEMPTY
        elif resolved.maybe_empty or "`" in value or "$(" in value:
            self.env[name] = _UNKNOWN
        elif "\x01" in resolved.full:
            self.env[name] = _NONEMPTY
        elif resolved.full:
            self.env[name] = resolved.full
        else:
            self.env[name] = _UNKNOWN

    def _guarded_inline(self, cmd: _Cmd, var: str) -> bool:
        """``[ -n "$X" ] && rm -rf "$X/"*`` on one line guards X for that line."""
        return bool(re.search(r"(-[nd]|-e)\s+\"?\$\{?" + re.escape(var) + r"\b[^&|;]*\]+\s*&&",
                              cmd.guard_text))

    # -- redirections -----------------------------------------------------------------
    def _redirect(self, cmd: _Cmd, words, op: str, target: _Word, add) -> None:
        if op not in (">", ">|", ">>", "&>", "&>>", "<>"):
            return
        path = _resolve(target.raw, self.env).full
        if _BLOCK_DEVICE.match(path) and not _SAFE_DEV.match(path):
            add(f"redirection writes straight onto the block device {path}, destroying its "
                "partition table and filesystems", "redirect-device")
            return
        if path == "/proc/sysrq-trigger":
            add("writing to /proc/sysrq-trigger can reboot or halt the host at once",
                "sysrq")
            return
        if op in ("&>>", ">>", "<>"):
            return
        name = _basename(words[0].value) if words else ""
        empties = (not words or name in (":", "true")
                   or (name == "echo" and all(w.value in ("-n", "-e", "") for w in words[1:]))
                   or (name == "printf" and all(w.value == "" for w in words[1:]))
                   or (name == "cat" and [w.value for w in words[1:]] == ["/dev/null"]))
        if empties and _SYSTEM_FILE_DIRS.match(path):
            add(f"truncates the system file {path} to nothing", "truncate-system-file")
        elif _CRITICAL_FILES.match(path):
            add(f"overwrites the critical system file {path} (a mistake here can lock you out "
                "or stop the host from booting)", "overwrite-critical-file")

    # -- interpreters -----------------------------------------------------------------
    def _pipe_into_interpreter(self, text, cmd: _Cmd, words, name, args, line_of, depth, via,
                               add) -> None:
        if name not in _INTERPRETERS and not re.fullmatch(r"python[0-9.]*", name):
            if name in ("source", ".", "eval"):
                self._substituted_download(words, add)
            return
        self._substituted_download(words, add)
        reads_stdin = all(w.value.startswith("-") for w in args) or (
            args and args[0].value in ("-s", "-") )
        if any(w.value == "-c" for w in args):
            reads_stdin = False
        if not reads_stdin:
            return
        if cmd.heredoc is not None:
            if name in _SHELLS:
                self.scan_text(cmd.heredoc, lambda off: line_of(cmd.start), depth + 1,
                               f"a here-document run by {name}")
            return
        if cmd.index == 0:
            return
        for prev in cmd.pipeline[:cmd.index]:
            pwords = _strip_prefixes(prev.words)
            if not pwords:
                continue
            pname = _basename(pwords[0].value)
            if pname in _DOWNLOADERS:
                add(f"pipes a script downloaded by {pname} straight into {name}: whatever the "
                    "server sends runs unseen; download it, read it, then run it",
                    "curl-pipe-shell")
                return
            if pname == "base64" or (pname == "xxd" and "-r" in [w.value for w in pwords]):
                add(f"pipes decoded, unreadable text into {name}", "encoded-pipe-shell")
                return
            if pname in ("echo", "printf") and name in _SHELLS:
                body = " ".join(w.value for w in pwords[1:] if not w.value.startswith("-"))
                self.scan_text(body, lambda off: line_of(cmd.start), depth + 1,
                               f"text piped into {name}")

    def _substituted_download(self, words, add) -> None:
        for w in words[1:]:
            if re.search(r"(\$\(|<\(|`)\s*(sudo\s+)?(curl|wget|fetch)\b", w.raw):
                add(f"runs a script fetched from the network by {_basename(words[0].value)} "
                    "without reading it first", "curl-pipe-shell")
                return

    def _nested_strings(self, text, cmd: _Cmd, name, args, values, line_of, depth, via) -> None:
        """Scan command strings handed to another shell (bash -c, ssh, eval, su -c, watch)."""
        at = lambda off: line_of(cmd.start)  # noqa: E731 - every nested finding maps to this line
        if name in _SHELLS:
            for op, target in cmd.redirects:
                if op == "<<<":
                    self.scan_text(target.value, at, depth + 1, f"a here-string run by {name}")
        if name == "alias":
            for v in values:
                if "=" in v:
                    alias, body = v.split("=", 1)
                    self.scan_text(body, at, depth + 1, f"alias {alias}")
            return
        if name in ("perl", "ruby", "node", "php") or re.fullmatch(r"python[0-9.]*", name):
            code = " ".join(values)
            if re.search(r"fork\s+while\s+fork|while\s*\(?\s*(1|True|true)\s*\)?\s*[:{]?\s*"
                         r"(os\.|Process\.)?fork\s*\(?", code):
                self._add(line_of(cmd.start), f"fork bomb: {name} forks in an endless loop "
                          "until the host runs out of processes",
                          self._line_text(text, cmd.start), "fork-bomb", via)
            return
        if name in _SHELLS or name == "su":
            for i, v in enumerate(values):
                if v == "-c" and i + 1 < len(values):
                    self.scan_text(values[i + 1], at, depth + 1, f"{name} -c")
                    return
        elif name == "eval" or name == "watch":
            body = " ".join(v for v in values if not (name == "watch" and v.startswith("-")))
            self.scan_text(body, at, depth + 1, name)
        elif name == "ssh":
            rest = self._after_options(values, {"-p", "-i", "-l", "-o", "-F", "-J", "-L", "-R",
                                                "-D", "-b", "-c", "-e", "-m", "-O", "-Q", "-S",
                                                "-W", "-w", "-E", "-B", "-I"})
            if len(rest) > 1:
                self.scan_text(" ".join(rest[1:]), at, depth + 1, f"ssh {rest[0]}")
        elif name in ("docker", "podman", "kubectl") and values[:1] == ["exec"]:
            rest = self._after_options(values[1:], {"-u", "--user", "-w", "--workdir", "-e",
                                                    "--env", "-c", "--container", "-n"})
            if len(rest) > 1:
                inner = _Cmd([_Word(v, v) for v in rest[1:]], [], [], cmd.start)
                self._command(text, inner, line_of, depth + 1, f"{name} exec {rest[0]}")
        elif name == "find":
            for i, v in enumerate(values):
                if v in ("-exec", "-execdir") and i + 1 < len(values):
                    tail = values[i + 1:]
                    if tail and _basename(tail[0]) in _SHELLS and "-c" in tail[:3]:
                        k = tail.index("-c")
                        if k + 1 < len(tail):
                            self.scan_text(tail[k + 1].replace("{}", "x"), at, depth + 1,
                                           "find -exec")

    @staticmethod
    def _after_options(values: list[str], with_arg: set[str]) -> list[str]:
        i = 0
        while i < len(values) and values[i].startswith("-"):
            if values[i] == "--":
                i += 1
                break
            i += 1 + (values[i] in with_arg)
        return values[i:]

    # -- the rules, one method per command name ---------------------------------------
    def _recursive_delete_targets(self, cmd: _Cmd, targets: list[_Word], what: str, add,
                                  rule: str) -> None:
        for w in targets:
            r = _resolve(w.raw, self.env)
            kind = _root_kind(self._in_cwd(r.full))
            if kind:
                add(f"{what} {kind}", rule)
                continue
            risky = [v for v in r.maybe_empty if not self._guarded_inline(cmd, v.strip("${}()`"))]
            if risky:
                empty_kind = _root_kind(r.empty_case) if r.empty_case else None
                if empty_kind:
                    add(f"{what} {w.raw}: if {risky[0]} is empty or unset this becomes "
                        f"{r.empty_case} ({empty_kind}); guard it with ${{{risky[0]}:?}}",
                        "rm-empty-var")
                    continue
            unquoted = [v for v in r.unquoted if not self._guarded_inline(cmd, v)]
            if unquoted:
                add(f"{what} the unquoted variable {w.raw}: empty, it can widen to another "
                    f"path, and word splitting or globbing can hit others; quote it and guard "
                    f"with ${{{unquoted[0]}:?}}", "rm-unquoted-var")

    def _rule_rm(self, cmd, name, args, values, add) -> None:
        flags = _short_flags(values)
        if "--no-preserve-root" in flags:
            add("rm --no-preserve-root disables the last protection of /", "rm-root")
        if not flags & {"-r", "-R", "--recursive"}:
            return
        self._recursive_delete_targets(cmd, _operands(args), "recursive delete of", add,
                                       "rm-root")

    def _rule_find(self, cmd, name, args, values, add) -> None:
        deletes = "-delete" in values or any(
            v in ("-exec", "-execdir", "-ok") and i + 1 < len(values)
            and _basename(values[i + 1]) in ("rm", "shred", "unlink")
            for i, v in enumerate(values))
        if not deletes:
            return
        starts: list[_Word] = []
        for w in args:
            if w.value.startswith(("-", "(", "!")) and w.value not in ("-H", "-L", "-P"):
                break
            if w.value not in ("-H", "-L", "-P"):
                starts.append(w)
        for w in starts:
            kind = _root_kind(_resolve(w.raw, self.env).full)
            if kind:
                add(f"find deletes files under {kind}", "find-delete-root")
                return
        self._recursive_delete_targets(cmd, starts, "find deletes under", add, "find-delete-root")

    def _rule_dd(self, cmd, name, args, values, add) -> None:
        for w in args:
            if w.value.startswith("of="):
                target = w.raw.split("=", 1)[1]
                path = _resolve(target, self.env).full
                if path.startswith("/dev/") and not _SAFE_DEV.match(path):
                    add(f"dd writes onto the device {path}, overwriting whatever is on it",
                        "dd-device")
                elif re.fullmatch(r"\x01[A-Za-z_]*(DISK|DEV|DRIVE|BLK|BLOCK|NVME|TARGET)"
                                  r"[A-Za-z0-9_]*\x01", path, re.I):
                    add(f"dd writes onto {target}, which by its name is a disk: check it is "
                        "the device you mean before running", "dd-device")

    def _rule_mkfs(self, cmd, name, args, values, add) -> None:
        if set(values) & {"--help", "-V", "--version"}:
            return
        if name.startswith(("mke2fs", "mkfs.ext")) and "-n" in _short_flags(values):
            return
        target = next((v for v in reversed(values) if v.startswith("/dev/") or "$" in v), "a device")
        add(f"{name} creates a new filesystem on {target}, erasing everything on it", "mkfs")

    def _rule_wipefs(self, cmd, name, args, values, add) -> None:
        flags = _short_flags(values)
        if flags & {"-a", "--all", "-o", "--offset"} and not flags & {"-n", "--no-act"}:
            add("wipefs erases filesystem, RAID and partition-table signatures", "wipefs")

    def _rule_sgdisk(self, cmd, name, args, values, add) -> None:
        if set(values) & {"-Z", "-z", "--zap", "--zap-all", "-o", "--clear"} or any(
                v.startswith(("--zap", "--clear")) for v in values):
            add("sgdisk wipes the partition table (GPT and MBR)", "sgdisk-zap")
        elif set(values) & {"-d", "--delete"} or any(v.startswith("--delete=") for v in values):
            add("sgdisk deletes a partition", "sgdisk-zap")

    def _rule_sfdisk(self, cmd, name, args, values, add) -> None:
        if not set(values) & {"-l", "--list", "-d", "--dump", "-s", "--show-size", "-V",
                              "--verify", "-n", "--no-act", "-J", "--json", "--help",
                              "-r", "--reorder"} and any(v.startswith("/dev/") or "$" in v
                                                         for v in values):
            add("sfdisk rewrites the partition table of the device", "partition-table")

    def _rule_parted(self, cmd, name, args, values, add) -> None:
        lowered = [v.lower() for v in values]
        if set(lowered) & {"mklabel", "mktable", "rm", "mkpart", "resizepart"}:
            add("parted changes the partition table (mklabel/rm erase partitions)",
                "partition-table")

    def _rule_fdisk(self, cmd, name, args, values, add) -> None:
        if not set(values) & {"-l", "--list", "--help", "-V"} and (
                cmd.index > 0 or cmd.heredoc is not None or any(op == "<" for op, _ in cmd.redirects)):
            add(f"{name} is being fed scripted input: it will write a new partition table",
                "partition-table")

    _rule_gdisk = _rule_fdisk

    def _rule_blkdiscard(self, cmd, name, args, values, add) -> None:
        if "--help" not in values:
            add("blkdiscard discards every block of the device: its data is gone at once",
                "blkdiscard")

    def _rule_shred(self, cmd, name, args, values, add) -> None:
        for w in _operands(args):
            path = _resolve(w.raw, self.env).full
            if _BLOCK_DEVICE.match(path) or _root_kind(path):
                add(f"shred overwrites {path} beyond recovery", "shred")

    def _rule_cryptsetup(self, cmd, name, args, values, add) -> None:
        if set(values) & {"luksFormat", "erase", "luksErase", "luksKillSlot", "reencrypt"}:
            add("cryptsetup formats or erases LUKS key slots: the data becomes unreadable",
                "cryptsetup")

    def _rule_mdadm(self, cmd, name, args, values, add) -> None:
        if set(values) & {"--zero-superblock", "--create", "-C"}:
            add("mdadm erases or rewrites RAID superblocks", "mdadm")

    def _rule_lvremove(self, cmd, name, args, values, add) -> None:
        if not set(values) & {"-t", "--test", "--help"}:
            add(f"{name} removes LVM volumes and the data on them", "lvm-remove")

    _rule_vgremove = _rule_pvremove = _rule_lvremove

    def _rule_hdparm(self, cmd, name, args, values, add) -> None:
        if any(v.startswith(("--security-erase", "--trim-sector-ranges")) for v in values):
            add("hdparm secure-erases or trims the drive", "disk-erase")

    def _rule_nvme(self, cmd, name, args, values, add) -> None:
        if values[:1] in (["format"], ["sanitize"]):
            add(f"nvme {values[0]} erases the namespace", "disk-erase")

    def _rule_chmod(self, cmd, name, args, values, add) -> None:
        flags = _short_flags(values)
        if not flags & {"-R", "--recursive"}:
            return
        operands = _operands(args)
        if not any(v.startswith("--reference") for v in values):
            operands = operands[1:]  # the mode or the owner
        for w in operands:
            kind = _root_kind(self._in_cwd(_resolve(w.raw, self.env).full), system_only=True)
            if kind:
                add(f"recursive {name} on {kind} breaks permissions that services and logins "
                    "depend on", "recursive-perms")
                return

    _rule_chown = _rule_chgrp = _rule_setfacl = _rule_chmod

    def _rule_git(self, cmd, name, args, values, add) -> None:
        rest = self._after_options(values, {"-C", "-c", "--git-dir", "--work-tree",
                                            "--namespace"})
        if not rest:
            return
        sub, opts = rest[0], rest[1:]
        flags = _short_flags(opts)
        if sub == "reset" and "--hard" in opts:
            add("git reset --hard discards every uncommitted change without a copy",
                "git-reset-hard")
        elif sub == "clean" and ("-f" in flags or "--force" in flags) and (
                flags & {"-d", "-x", "-X"}) and not flags & {"-n", "--dry-run"}:
            add("git clean -f with -d/-x deletes untracked and ignored files, including local "
                "configuration and data", "git-clean")
        elif sub == "push" and (flags & {"-f", "--force"} or any(o.startswith("+") for o in opts)):
            add("git push --force rewrites the remote's history (use --force-with-lease)",
                "git-push-force")

    def _rule_docker(self, cmd, name, args, values, add) -> None:
        rest = self._after_options(values, {"-H", "--host", "--context", "-c", "--config",
                                            "-f", "--file", "-p", "--project-name"})
        if not rest:
            return
        if rest[0] == "compose":
            rest = self._after_options(rest[1:], {"-f", "--file", "-p", "--project-name",
                                                  "--env-file", "--profile"})
            rest = ["compose-" + rest[0]] + rest[1:] if rest else []
        if not rest:
            return
        sub, opts = rest[0], rest[1:]
        flags = _short_flags(opts)
        if sub == "system" and opts[:1] == ["prune"] and "--volumes" in flags:
            add(f"{name} system prune --volumes deletes every unused volume: container data "
                "that is not running right now is gone", "docker-prune-volumes")
        elif sub == "volume" and opts[:1] and opts[0] in ("rm", "remove", "prune"):
            add(f"{name} volume {opts[0]} deletes container data volumes", "docker-volume-rm")
        elif sub in ("compose-down",) and flags & {"-v", "--volumes"}:
            add(f"{name} compose down -v deletes the project's named volumes", "docker-volume-rm")

    _rule_podman = _rule_docker

    def _rule_docker_compose(self, cmd, name, args, values, add) -> None:
        if values[:1] == ["down"] and _short_flags(values[1:]) & {"-v", "--volumes"}:
            add("docker-compose down -v deletes the project's named volumes", "docker-volume-rm")

    def _rule_zpool(self, cmd, name, args, values, add) -> None:
        if values[:1] in (["destroy"], ["labelclear"], ["create"]):
            add(f"zpool {values[0]} destroys a pool or the labels of its disks", "zfs-destroy")

    def _rule_zfs(self, cmd, name, args, values, add) -> None:
        if values[:1] == ["destroy"]:
            flags = _short_flags(values[1:])
            targets = _operands([_Word(v, v) for v in values[1:]])
            if flags & {"-r", "-R"} or any("@" not in t.value for t in targets):
                add("zfs destroy removes a dataset (and with -r every child and snapshot)",
                    "zfs-destroy")
        elif values[:1] == ["rollback"] and _short_flags(values[1:]) & {"-r", "-R"}:
            add("zfs rollback -r destroys every later snapshot", "zfs-destroy")

    def _rule_btrfs(self, cmd, name, args, values, add) -> None:
        ops = [v for v in values if not v.startswith("-")]
        if len(ops) >= 2 and "subvolume".startswith(ops[0]) and len(ops[0]) >= 2 and \
                "delete".startswith(ops[1]):
            add("btrfs subvolume delete removes the subvolume and its data", "btrfs-delete")
        elif ops[:1] and "check".startswith(ops[0]) and len(ops[0]) >= 2 and "--repair" in values:
            add("btrfs check --repair can make a damaged filesystem worse; run it read-only "
                "first", "btrfs-repair")

    def _rule_shutdown(self, cmd, name, args, values, add) -> None:
        if set(values) & {"-c", "--help", "--show"}:
            return
        add(f"{name} takes the host down for everyone using it", "power")

    _rule_reboot = _rule_poweroff = _rule_halt = _rule_shutdown

    def _rule_init(self, cmd, name, args, values, add) -> None:
        if values[:1] in (["0"], ["6"]):
            add(f"{name} {values[0]} halts or reboots the host", "power")

    _rule_telinit = _rule_init

    def _rule_systemctl(self, cmd, name, args, values, add) -> None:
        ops = [v for v in values if not v.startswith("-")]
        if ops[:1] and ops[0] in ("poweroff", "reboot", "halt", "kexec", "soft-reboot",
                                  "emergency", "rescue"):
            add(f"systemctl {ops[0]} takes the host down or out of service", "power")

    def _rule_kill(self, cmd, name, args, values, add) -> None:
        i = 0
        if values[:1] in (["-s"], ["-n"]):
            i = 2
        elif values[:1] and values[0].startswith("-") and values[0] != "--":
            i = 1
        if values[i:i + 1] == ["--"]:
            i += 1
        pids = values[i:]
        if "-1" in pids:
            add("kill -1 signals every process you may signal (as root: all of them)",
                "kill-all")
        elif "1" in pids:
            add("killing PID 1 (init) brings the host down", "kill-all")

    def _rule_killall5(self, cmd, name, args, values, add) -> None:
        add("killall5 signals every process on the host", "kill-all")

    def _rule_iptables(self, cmd, name, args, values, add) -> None:
        flags = _short_flags(values)
        if "-F" in flags or "--flush" in flags:
            add(f"{name} --flush drops every firewall rule (with a DROP policy it locks you "
                "out; otherwise it opens the host)", "firewall-flush")
        elif ("-P" in flags or "--policy" in flags) and "DROP" in values:
            add(f"{name} -P ... DROP can lock you out of a remote host", "firewall-flush")

    _rule_ip6tables = _rule_iptables_legacy = _rule_iptables_nft = _rule_iptables

    def _rule_nft(self, cmd, name, args, values, add) -> None:
        if values[:2] == ["flush", "ruleset"]:
            add("nft flush ruleset drops every firewall rule", "firewall-flush")

    def _rule_ufw(self, cmd, name, args, values, add) -> None:
        if values[:1] == ["reset"]:
            add("ufw reset deletes every firewall rule", "firewall-flush")

    def _rule_truncate(self, cmd, name, args, values, add) -> None:
        zero = any(re.fullmatch(r"(-s|--size=?)\s*0", v) for v in values) or \
            any(v in ("-s", "--size") and i + 1 < len(values) and values[i + 1] == "0"
                for i, v in enumerate(values))
        if not zero:
            return
        for w in _operands(args):
            path = _resolve(w.raw, self.env).full
            if _SYSTEM_FILE_DIRS.match(path) and path != "0":
                add(f"truncate -s 0 empties the system file {path}", "truncate-system-file")

    def _rule_mv(self, cmd, name, args, values, add) -> None:
        ops = _operands(args)
        if len(ops) >= 2 and _resolve(ops[-1].raw, self.env).full == "/dev/null":
            add("mv onto /dev/null replaces the device node and loses what was moved",
                "mv-dev-null")
            return
        for w in ops[:-1]:
            kind = _root_kind(_resolve(w.raw, self.env).full)
            if kind:
                add(f"mv moves {kind} away", "mv-root")
                return
        self._onto_device(ops[-1:] if len(ops) >= 2 else [], name, add)

    def _rule_cp(self, cmd, name, args, values, add) -> None:
        ops = _operands(args)
        if len(ops) >= 2:
            self._onto_device(ops[-1:], name, add)
            dest = _resolve(ops[-1].raw, self.env).full
            if ops[0].value == "/dev/null" and _SYSTEM_FILE_DIRS.match(dest):
                add(f"cp /dev/null empties the system file {dest}", "truncate-system-file")

    def _rule_tee(self, cmd, name, args, values, add) -> None:
        self._onto_device(_operands(args), name, add)
        if "-a" not in values and "--append" not in values:
            for w in _operands(args):
                path = _resolve(w.raw, self.env).full
                if _CRITICAL_FILES.match(path):
                    add(f"tee overwrites the critical system file {path}",
                        "overwrite-critical-file")

    _rule_pv = _rule_tee

    def _onto_device(self, targets: list[_Word], name: str, add) -> None:
        for w in targets:
            path = _resolve(w.raw, self.env).full
            if _BLOCK_DEVICE.match(path) and not _SAFE_DEV.match(path):
                add(f"{name} writes onto the block device {path}", "write-device")

    def _rule_crontab(self, cmd, name, args, values, add) -> None:
        if "-r" in _short_flags(values):
            add("crontab -r deletes every cron job of the user without asking",
                "crontab-remove")

    def _rule_rsync(self, cmd, name, args, values, add) -> None:
        if not any(v.startswith("--delete") or v in ("--del", "--remove-source-files")
                   for v in values):
            return
        if _short_flags(values) & {"-n", "--dry-run"}:
            return  # a dry run only lists what it would delete
        ops = _operands(args)
        if len(ops) < 2:
            return
        dest = _resolve(ops[-1].raw, self.env)
        kind = _root_kind(dest.full)
        if kind:
            add(f"rsync --delete makes {kind} a copy of the source, deleting the rest",
                "rsync-delete")
            return
        for w in ops[:-1]:
            r = _resolve(w.raw, self.env)
            risky = [v for v in r.maybe_empty if not self._guarded_inline(cmd, v)]
            if risky:
                add(f"rsync --delete from {w.raw}: if {risky[0]} is empty the source is wrong "
                    f"and the destination is emptied; guard it with ${{{risky[0]}:?}}",
                    "rsync-delete")
                return


# ───────────────────────────── public API ─────────────────────────────

def extract_shell_blocks(markdown: str) -> list[tuple[int, str]]:
    """Shell code blocks of a Markdown text: ``[(first_line, code)]``, lines 1-based.

    Fenced blocks tagged bash/sh/shell/zsh/console... or untagged, and indented code blocks.
    Console-style blocks keep only prompted lines (``$ cmd``), without the prompt.
    """
    from markdown_it import MarkdownIt

    blocks: list[tuple[int, str]] = []
    for tok in MarkdownIt("commonmark").parse(markdown):
        if tok.type == "fence" and tok.map:
            lang = (tok.info or "").strip().split()[0].lower() if (tok.info or "").strip() else ""
            lang = lang.strip("{}.")
            if lang not in SHELL_FENCE_LANGUAGES:
                continue
            code = tok.content
            if lang in _PROMPTED:
                code = _strip_prompts(code)
            blocks.append((tok.map[0] + 2, code))
        elif tok.type == "code_block" and tok.map:
            blocks.append((tok.map[0] + 1, tok.content))
    return blocks


def _strip_prompts(code: str) -> str:
    out = []
    for line in code.split("\n"):
        m = re.match(r"^\s*(?:\S+@\S+\s*)?(?:[\w~/.:-]*)?[$%#]\s(.*)$", line)
        out.append(m.group(1) if m else "")  # output lines become blank, keeping line numbers
    return "\n".join(out)


def scan_shell(code: str, first_line: int = 1) -> list[Finding]:
    """Findings for plain shell ``code``; line numbers start at ``first_line``."""
    scanner = _Scanner()

    def line_of(offset: int) -> int:
        return first_line + code.count("\n", 0, offset)

    scanner.scan_text(code, line_of)
    return sorted(scanner.findings, key=lambda f: (f.line, f.rule))


def _has_fence(text: str) -> bool:
    return bool(re.search(r"^\s{0,3}(```|~~~)", text, re.M))


def scan(text: str, markdown: bool | None = None) -> list[Finding]:
    """Destructive commands in ``text``, sorted by line.

    Args:
        text: plain shell, or a Markdown answer holding fenced code blocks.
        markdown: True scans only the answer's shell code blocks (use this for model answers:
            prose is never read as commands); False scans the whole text as shell; None
            (default) treats the text as Markdown when it holds a fence, else as shell.

    Returns:
        ``[Finding(line, reason, snippet, rule)]``; line numbers are lines of ``text``.
    """
    if markdown is None:
        markdown = _has_fence(text)
    if not markdown:
        return scan_shell(text)
    findings: list[Finding] = []
    for first, code in extract_shell_blocks(text):
        findings.extend(scan_shell(code, first))
    return sorted(findings, key=lambda f: (f.line, f.rule))
