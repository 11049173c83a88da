"""The scanner: walks the commands of a text in order, keeping what is known about variables.

Each command (after ``sudo``/``env``/``nohup``/... prefixes) goes through the rules; strings run
by ``bash -c``, ``ssh host CMD``, ``eval``, ``echo ... | sh`` and here-documents fed to a shell
are scanned recursively, and so are ``$(...)`` substitutions the token fallback left unparsed.
"""

from __future__ import annotations

import posixpath
import re

from .commands import Command, Word, after_options, basename, pipelines, strip_prefixes
from .lexer import Token
from .paths import (BLOCK_DEVICE, CRITICAL_FILES, NONEMPTY, SAFE_DEV, SYSTEM_FILE_DIRS, UNKNOWN,
                    resolve)
from .report import Report
from .rules import Rules

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "fish", "busybox"})
INTERPRETERS = SHELLS | {"python", "python2", "python3", "perl", "ruby", "node", "php"}
DOWNLOADERS = frozenset({"curl", "wget", "fetch", "http", "https", "lynx", "aria2c"})
MAX_DEPTH = 4  # nesting of bash -c / ssh / eval strings scanned recursively
_PYTHON = re.compile(r"python[0-9.]*")


class Scanner(Rules):
    """Walks commands in order, keeping what is known about variables.

    ``report.findings`` holds what was found, in the order found.
    """

    def __init__(self) -> None:
        self.env: dict[str, str] = {}
        self.cwd: str | None = None  # known only after a cd to a literal path
        self.report = Report()

    # -- entry ------------------------------------------------------------------------
    def scan_text(self, text: str, line_of, depth: int = 0, via: str = "") -> None:
        """Scan shell ``text``; ``line_of(offset)`` maps an offset to the reported line."""
        if depth > MAX_DEPTH:
            return
        for unit, pipes in pipelines(text):
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

    def _fork_bomb(self, text: str, unit: list[Token], line_of, via: str) -> None:
        # Quoted words become a placeholder: a fork bomb inside a string is only text.
        skeleton = " ".join(
            t.value if t.kind == "op" else
            ("_" if re.search(r"['\"\\]", text[t.start:t.end]) else text[t.start:t.end])
            for t in unit if t.kind in ("word", "op"))
        m = (re.search(r"(\S+)\s*\(\s*\)\s*\{\s*\1\s*\|\s*&?\s*\1\s*&", skeleton)
             or re.search(r"\bfunction\s+(\S+)\s*(\(\s*\))?\s*\{\s*\1\s*\|\s*&?\s*\1\s*&",
                          skeleton))
        if m:
            self.report.add(line_of(unit[0].start), "fork bomb: a function that pipes into itself in "
                      "the background until the host runs out of processes",
                      self._line_text(text, unit[0].start), "fork-bomb", via)

    @staticmethod
    def _line_text(text: str, offset: int) -> str:
        start = text.rfind("\n", 0, offset) + 1
        end = text.find("\n", offset)
        return text[start:end if end >= 0 else len(text)]

    # -- one command ------------------------------------------------------------------
    def _command(self, text: str, cmd: Command, line_of, depth: int, via: str) -> None:
        line = line_of(cmd.start)
        snippet = self._line_text(text, cmd.start)

        def add(reason: str, rule: str) -> None:
            self.report.add(line, reason, snippet, rule, via)

        for a in cmd.assignments:
            self._assign(a.raw)
        words = strip_prefixes(cmd.words)
        for op, target in cmd.redirects:
            self._redirect(cmd, words, op, target, add)
        if not words:
            return
        name = basename(words[0].value)
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
                if self.env.get(m.group(1)) in (None, UNKNOWN):
                    self.env[m.group(1)] = NONEMPTY
        if name in ("for", "read"):
            return
        if name in ("cd", "pushd"):
            self._change_dir(args)
            return
        rule = self.rule_for(name)
        if rule is not None:
            rule(cmd, name, args, values, add)
        self._pipe_into_interpreter(text, cmd, words, name, args, line_of, depth, via, add)
        self._nested_strings(text, cmd, name, values, line_of, depth, via)

    def _change_dir(self, args: list[Word]) -> None:
        operands = [w for w in args if not (w.value.startswith("-") and len(w.value) > 1)]
        target = resolve(operands[0].raw, self.env).full if operands else "~"
        if "\x01" in target or target == "-":
            self.cwd = None
        elif target.startswith(("/", "~")):
            self.cwd = target
        elif self.cwd is not None:
            self.cwd = posixpath.join(self.cwd, target)

    def _assign(self, raw: str) -> None:
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)(\[[^]]*\])?\+?=(.*)$", raw, re.S)
        if not m:
            return
        name, value = m.group(1), m.group(3)
        if m.group(2) or raw[len(name):].startswith("+="):
            self.env[name] = UNKNOWN
            return
        resolved = resolve(value, self.env)
        if re.search(r"\$\{[A-Za-z_][A-Za-z0-9_]*:[?=]|\$\{[A-Za-z_][A-Za-z0-9_]*:-[^}]", value):
            self.env[name] = NONEMPTY
        elif resolved.maybe_empty or "`" in value or "$(" in value:
            self.env[name] = UNKNOWN
        elif "\x01" in resolved.full:
            self.env[name] = NONEMPTY
        elif resolved.full:
            self.env[name] = resolved.full
        else:
            self.env[name] = UNKNOWN

    # -- redirections -----------------------------------------------------------------
    def _redirect(self, cmd: Command, words, op: str, target: Word, add) -> None:
        if op not in (">", ">|", ">>", "&>", "&>>", "<>"):
            return
        path = resolve(target.raw, self.env).full
        if BLOCK_DEVICE.match(path) and not SAFE_DEV.match(path):
            add(f"redirection writes straight onto the block device {path}, destroying its "
                "partition table and filesystems", "redirect-device")
            return
        if path == "/proc/sysrq-trigger":
            add("writing to /proc/sysrq-trigger can reboot or halt the host at once",
                "sysrq")
            return
        if op in ("&>>", ">>", "<>"):
            return
        name = basename(words[0].value) if words else ""
        empties = (not words or name in (":", "true")
                   or (name == "echo" and all(w.value in ("-n", "-e", "") for w in words[1:]))
                   or (name == "printf" and all(w.value == "" for w in words[1:]))
                   or (name == "cat" and [w.value for w in words[1:]] == ["/dev/null"]))
        if empties and SYSTEM_FILE_DIRS.match(path):
            add(f"truncates the system file {path} to nothing", "truncate-system-file")
        elif CRITICAL_FILES.match(path):
            add(f"overwrites the critical system file {path} (a mistake here can lock you out "
                "or stop the host from booting)", "overwrite-critical-file")

    # -- interpreters -----------------------------------------------------------------
    def _pipe_into_interpreter(self, text, cmd: Command, words, name, args, line_of, depth, via,
                               add) -> None:
        if name not in INTERPRETERS and not re.fullmatch(r"python[0-9.]*", name):
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
            if name in SHELLS:
                self.scan_text(cmd.heredoc, lambda off: line_of(cmd.start), depth + 1,
                               f"a here-document run by {name}")
            return
        if cmd.index == 0:
            return
        for prev in cmd.pipeline[:cmd.index]:
            pwords = strip_prefixes(prev.words)
            if not pwords:
                continue
            pname = basename(pwords[0].value)
            if pname in DOWNLOADERS:
                add(f"pipes a script downloaded by {pname} straight into {name}: whatever the "
                    "server sends runs unseen; download it, read it, then run it",
                    "curl-pipe-shell")
                return
            if pname == "base64" or (pname == "xxd" and "-r" in [w.value for w in pwords]):
                add(f"pipes decoded, unreadable text into {name}", "encoded-pipe-shell")
                return
            if pname in ("echo", "printf") and name in SHELLS:
                body = " ".join(w.value for w in pwords[1:] if not w.value.startswith("-"))
                self.scan_text(body, lambda off: line_of(cmd.start), depth + 1,
                               f"text piped into {name}")

    def _substituted_download(self, words, add) -> None:
        for w in words[1:]:
            if re.search(r"(\$\(|<\(|`)\s*(sudo\s+)?(curl|wget|fetch)\b", w.raw):
                add(f"runs a script fetched from the network by {basename(words[0].value)} "
                    "without reading it first", "curl-pipe-shell")
                return

    def _nested_strings(self, text, cmd: Command, name, values, line_of, depth, via) -> None:
        """Scan command strings handed to another shell (bash -c, ssh, eval, su -c, watch)."""
        if name in SHELLS:
            for op, target in cmd.redirects:
                if op == "<<<":
                    self._scan_nested(target.value, cmd, line_of, depth,
                                      f"a here-string run by {name}")
        nested = _NESTED.get(name) or (Scanner._interpreter_code if _PYTHON.fullmatch(name)
                                       else None)
        if nested is not None:
            nested(self, text, cmd, name, values, line_of, depth, via)

    def _scan_nested(self, body: str, cmd: Command, line_of, depth: int, via: str) -> None:
        # Every nested finding is reported on the line of the command that runs the string.
        self.scan_text(body, lambda off: line_of(cmd.start), depth + 1, via)

    def _alias(self, text, cmd, name, values, line_of, depth, via) -> None:
        for v in values:
            if "=" in v:
                alias, body = v.split("=", 1)
                self._scan_nested(body, cmd, line_of, depth, f"alias {alias}")

    def _interpreter_code(self, text, cmd, name, values, line_of, depth, via) -> None:
        code = " ".join(values)
        if re.search(r"fork\s+while\s+fork|while\s*\(?\s*(1|True|true)\s*\)?\s*[:{]?\s*"
                     r"(os\.|Process\.)?fork\s*\(?", code):
            self.report.add(line_of(cmd.start), f"fork bomb: {name} forks in an endless loop "
                            "until the host runs out of processes",
                            self._line_text(text, cmd.start), "fork-bomb", via)

    def _dash_c(self, text, cmd, name, values, line_of, depth, via) -> None:
        for i, v in enumerate(values):
            if v == "-c" and i + 1 < len(values):
                self._scan_nested(values[i + 1], cmd, line_of, depth, f"{name} -c")
                return

    def _eval(self, text, cmd, name, values, line_of, depth, via) -> None:
        body = " ".join(v for v in values if not (name == "watch" and v.startswith("-")))
        self._scan_nested(body, cmd, line_of, depth, name)

    def _ssh(self, text, cmd, name, values, line_of, depth, via) -> None:
        rest = after_options(values, {"-p", "-i", "-l", "-o", "-F", "-J", "-L", "-R", "-D", "-b",
                                      "-c", "-e", "-m", "-O", "-Q", "-S", "-W", "-w", "-E", "-B",
                                      "-I"})
        if len(rest) > 1:
            self._scan_nested(" ".join(rest[1:]), cmd, line_of, depth, f"ssh {rest[0]}")

    def _container_exec(self, text, cmd, name, values, line_of, depth, via) -> None:
        if values[:1] != ["exec"]:
            return
        rest = after_options(values[1:], {"-u", "--user", "-w", "--workdir", "-e", "--env", "-c",
                                          "--container", "-n"})
        if len(rest) > 1:
            inner = Command([Word(v, v) for v in rest[1:]], [], [], cmd.start)
            self._command(text, inner, line_of, depth + 1, f"{name} exec {rest[0]}")

    def _find_exec(self, text, cmd, name, values, line_of, depth, via) -> None:
        for i, v in enumerate(values):
            if v in ("-exec", "-execdir") and i + 1 < len(values):
                tail = values[i + 1:]
                if tail and basename(tail[0]) in SHELLS and "-c" in tail[:3]:
                    k = tail.index("-c")
                    if k + 1 < len(tail):
                        self._scan_nested(tail[k + 1].replace("{}", "x"), cmd, line_of, depth,
                                          "find -exec")


# Commands that run a string of shell (or code) they are given, and how to find that string.
_NESTED = {
    **{shell: Scanner._dash_c for shell in SHELLS | {"su"}},
    "alias": Scanner._alias,
    **{name: Scanner._interpreter_code for name in ("perl", "ruby", "node", "php")},
    "eval": Scanner._eval, "watch": Scanner._eval,
    "ssh": Scanner._ssh,
    **{name: Scanner._container_exec for name in ("docker", "podman", "kubectl")},
    "find": Scanner._find_exec,
}
