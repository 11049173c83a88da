"""Variables and paths: what a word expands to, and whether the path is one worth protecting.

Literal assignments earlier in the text are known values; ``${X:?}``, ``${X:-x}`` and an
earlier ``: "${X:?}"`` make X non-empty; anything else may be empty. A recursive delete whose
path collapses onto a root when such a variable is empty is what the scanner looks for.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from .lexer import skip_balanced

# What ``env`` holds for a variable whose value is not known: may be empty, or is not.
UNKNOWN, NONEMPTY = "\x00unknown", "\x00nonempty"
_PARAM_RE = re.compile(r"\$(?:\{(?P<braced>[^}]*)\}|(?P<name>[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]))")


@dataclass
class Resolved:
    """A word expanded against what is known of its variables."""

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
    if state is None or state == UNKNOWN:
        return name, f"\x01{name}\x01", "maybe"
    if state == NONEMPTY:
        return name, f"\x01{name}\x01", "nonempty"
    if op:  # ${X%/} and friends on a known value: treat as nonempty, value unknown
        return name, f"\x01{name}\x01", "nonempty"
    return name, state, "known"


def _substitution_end(raw: str, i: int) -> int | None:
    """The index past the command substitution starting at ``raw[i]``, or None if none does."""
    if raw.startswith("$(", i):
        return skip_balanced(raw, i + 1, "(", ")")
    if raw.startswith("`", i):
        j = raw.find("`", i + 1)
        return len(raw) if j < 0 else j + 1
    return None


def resolve(raw: str, env: dict[str, str]) -> Resolved:
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
        j = _substitution_end(raw, i) if quote != "'" else None
        if j is not None:  # $(...) or `...`: its output is unknown and may be empty
            full.append("\x01$()\x01" if c == "$" else "\x01``\x01")
            maybe.append(raw[i:j])
            if not quote:
                unquoted.append(raw[i:j])
            i = j
            continue
        if c == "$" and quote != "'":
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
        full.append(c)
        empty.append(c)
        i += 1
    return Resolved("".join(full), "".join(empty), maybe, unquoted)


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


def root_kind(path: str, system_only: bool = False) -> str | None:
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


# Devices and system files that writes and truncations are checked against.
BLOCK_DEVICE = re.compile(
    r"^/dev/(sd[a-z]+\d*|hd[a-z]+\d*|vd[a-z]+\d*|xvd[a-z]+\d*|nvme\d+n\d+(p\d+)?|"
    r"mmcblk\d+(p\d+)?|md\d+(p\d+)?|md/.+|dm-\d+|mapper/.+|disk/.+|loop\d+|nbd\d+|zd\d+|"
    r"bcache\d+|rbd\d+|sr\d+|[^/]*\x01.*)$")
SAFE_DEV = re.compile(r"^/dev/(null|zero|stdout|stderr|stdin|tty\w*|pts/.*|fd/.*|shm/.*|urandom|random)$")
SYSTEM_FILE_DIRS = re.compile(r"^/(etc|boot|usr|bin|sbin|lib|lib32|lib64|var/lib|root)(/|$)")
CRITICAL_FILES = re.compile(r"^/etc/(passwd|shadow|group|gshadow|sudoers|fstab|crypttab|"
                            r"default/grub|ssh/sshd_config)$|^/boot/")
