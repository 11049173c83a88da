"""Tracked documents: which files of the repository are indexed, as what kind, and how they decode.

The only source of paths is ``git ls-files -z -s`` (one subprocess): ``-z`` gives names exactly as
stored, whatever bytes they hold, and ``-s`` gives each entry's mode so submodule gitlinks
(mode 160000) are recognised without touching the disk. Staged but uncommitted files are
listed by git and therefore indexed; an empty repository lists nothing.

Each tracked path is classified once:

* its *kind* from the ``AI_GLOBS_*`` settings (header, readme, manual, template, doc, first match
  in that order), else ``header`` when it is a script known by its shebang only
  (``shebang_kind``); a path matching none is left out with the reason ``not a documentation
  kind``;
* what it is on disk (``os.lstat``): a regular file is read; a path deleted from the work tree is
  treated as deleted; symbolic links are never followed (a link may lead outside the repository
  or to a git-ignored file holding secrets), and anything else is skipped with its reason. This
  holds for every component of the path, not only the last: a tracked ``Guides/README.md`` whose
  ``Guides`` folder was replaced by a link is not read, because the path it resolves to is not
  the tracked one (``resolves_as_tracked``). The read itself (``open_tracked``) refuses a link
  and a file swapped since the check.

Decoding (``decode``): NUL in the first 8 KiB means binary; UTF-8 with the BOM stripped;
else cp1252, else latin-1, with a warning naming the file; line endings normalised to
``\\n``. Bytes are never dropped (no ``errors="ignore"``).

This module is on the no-op refresh path, so it imports nothing heavy.
"""

from __future__ import annotations

import binascii
import errno
import importlib.util
import os
import re
import stat
from pathlib import Path
from typing import Iterable, NamedTuple, Sequence

from varaverk import exitcodes, gitrepo
from varaverk.errors import VaraverkError

KINDS = ("header", "readme", "manual", "template", "doc")
GITLINK_MODE = "160000"
BINARY_SNIFF_BYTES = 8192

# Reasons a tracked path is not indexed; --status and the log show them verbatim.
REASON_NOT_DOC = "not a documentation kind"
REASON_SUBMODULE = "submodule (gitlink, mode 160000)"
REASON_MISSING = "deleted from the work tree (not yet committed)"
REASON_SYMLINK_OUT = "symbolic link resolving outside the repository (never followed)"
REASON_SYMLINK_IN = "symbolic link (never followed; its target is indexed under its own path)"
REASON_PARENT_LINK_OUT = ("a parent folder is a symbolic link resolving outside the repository "
                          "(never followed)")
REASON_PARENT_LINK_IN = ("a parent folder is a symbolic link (never followed: the file it leads "
                         "to is not the tracked one)")
REASON_NOT_REGULAR = "not a regular file"
REASON_BAD_NAME = "file name is not valid UTF-8"
REASON_BINARY = "binary file (NUL byte in the first 8 KiB)"
REASON_UNREADABLE = "cannot be read"
# Documentation is prose; a tracked "document" this large is generated or a data dump, and
# reading it whole would cost more memory than the whole rest of the index.
MAX_DOCUMENT_BYTES = 8 << 20
REASON_TOO_LARGE = f"larger than {MAX_DOCUMENT_BYTES >> 20} MiB (not documentation to embed)"


class SourcesError(VaraverkError, RuntimeError):
    """The repository cannot be listed (not a git work tree, git missing): AI_REPO_ROOT is
    wrong for this host, a configuration error."""

    exit_code = exitcodes.CONFIG
    kind = "repository"


class TrackedPath(NamedTuple):
    """One ``git ls-files`` entry.

    Attributes:
        path: repository-relative path, decoded with ``os.fsdecode`` (surrogateescape).
        mode: git's octal mode string (``100644``, ``100755``, ``120000``, ``160000``).
    """

    path: str
    mode: str


class Listing(NamedTuple):
    """The tracked paths of a repository and its HEAD.

    Attributes:
        root: the repository root (absolute).
        entries: tracked paths in git's order, one per path (conflict stages folded).
        head: the commit SHA of HEAD, or None when the repository has no commits yet.
            On a detached HEAD this is still the SHA, never the word ``HEAD``.
        git_state: ``gitrepo.state_text`` of the listing's ``git rev-parse`` (HEAD, the git
            index file and the prefix), taken with it (``varaverk.index.fingerprint``).
    """

    root: Path
    entries: tuple[TrackedPath, ...]
    head: str | None
    git_state: str = ""


def list_tracked(root: str | os.PathLike) -> Listing:
    """List the tracked paths of the repository at ``root`` with their modes, and its HEAD.

    Runs ``git ls-files -z -s`` and ``git rev-parse`` (``gitrepo.STATE``: HEAD) side by side
    (two subprocesses, overlapping). An empty repository gives no entries and ``head=None``.

    Raises:
        SourcesError: git is missing or ``root`` is not a git work tree.
    """
    root = Path(root)
    try:
        ls = gitrepo.spawn(root, "ls-files", "-z", "-s")
        rev = gitrepo.spawn(root, *gitrepo.STATE)
    except OSError as exc:
        raise SourcesError(f"cannot run git: {exc}") from None
    out, err = ls.communicate()
    head_out, _ = rev.communicate()
    if ls.returncode != 0:
        msg = os.fsdecode(err).strip() or f"git ls-files exited {ls.returncode}"
        raise SourcesError(f"cannot list tracked files in {root}: {msg}")
    entries: list[TrackedPath] = []
    seen: set[bytes] = set()
    for record in out.split(b"\0"):
        if not record:
            continue
        meta, _, raw_path = record.partition(b"\t")
        if raw_path in seen:  # unmerged paths appear once per conflict stage
            continue
        seen.add(raw_path)
        mode = meta.split(b" ", 1)[0].decode("ascii", "replace")
        entries.append(TrackedPath(os.fsdecode(raw_path), mode))
    state = gitrepo.state_text(rev.returncode, head_out)
    head = state.rstrip("\n").rpartition("\n")[2] if rev.returncode == 0 else None
    return Listing(root=root, entries=tuple(entries), head=head or None, git_state=state)


# ---------------------------------------------------------------------------------------------
# Globs
# ---------------------------------------------------------------------------------------------

def compile_globs(globs: Iterable[str]) -> re.Pattern[str] | None:
    """One compiled regex matching any of ``globs`` over a whole repository-relative path.

    ``**/x`` matches ``x`` at any depth including the top, ``a/**`` everything under ``a``,
    ``a/**/b`` also ``a/b``; ``README.md`` is the root README only. Returns None when
    ``globs`` holds no pattern. The translation is wcmatch's; the patterns are joined into one
    regex so that classifying a path costs one match whatever the number of globs.
    """
    patterns = [g for g in globs if g]
    if not patterns:
        return None
    # Imported here: a no-op refresh takes every kind from the index (see KindMatcher) and
    # never translates a glob.
    from wcmatch import glob as wcglob

    # Path globs in the sense of bash's globstar: "*", "?" and "[...]" stay within one folder,
    # a whole "**" component crosses any number of folders (none included), dot-files match
    # like any other name, and a pattern without "/" names a top-level path only (unlike
    # .gitignore). No NEGATE: none is excluded.
    include, _exclude = wcglob.translate(
        patterns, flags=wcglob.GLOBSTAR | wcglob.DOTGLOB | wcglob.FORCEUNIX)
    # \Z: wcmatch ends each regex with "$", which also matches before a final newline, and a
    # tracked name may end with one.
    return re.compile("(?:" + "|".join(include) + r")\Z")


def classifier_stamp() -> str:
    """A checksum (CRC-32, hex) of the code that turns globs into kinds: this module,
    ``named_sources`` and wcmatch's translator, read without importing wcmatch. Kinds stored
    under another stamp are decided again (see ``varaverk.index.classify``)."""
    spec = importlib.util.find_spec("wcmatch")
    folder = Path(spec.origin).parent if spec is not None and spec.origin else Path()
    here = Path(__file__)
    crc = 0
    for path in (here, here.parents[1] / "named_sources.py", folder / "__meta__.py",
                 folder / "_wcparse.py", folder / "glob.py"):
        try:
            crc = binascii.crc32(path.read_bytes(), crc)
        except OSError:  # not installed as files: the name stands in
            crc = binascii.crc32(b"missing " + path.name.encode(), crc)
    return f"{crc:08x}"


class KindMatcher:
    """Decides a path's kind from the ``AI_GLOBS_*`` settings.

    Kinds are tried in the order header, readme, manual, template, doc; the first whose globs
    match the whole path wins (so ``docs/README-x.md`` is a readme, not a doc). The globs are
    compiled on first use: a no-op refresh takes every kind from the index and never needs
    them (compiling wcmatch's regexes costs more than the rest of such a run's Python).
    """

    def __init__(self, globs_by_kind: dict[str, Sequence[str]], exclude: Sequence[str] = ()):
        self._globs = globs_by_kind
        self._exclude_globs = exclude
        self._compiled: tuple[list, re.Pattern[str] | None] | None = None

    @classmethod
    def from_settings(cls, settings) -> "KindMatcher":
        """Build from a ``Settings`` (fields ``ai_globs_<kind>``, ``ai_globs_exclude`` and
        ``ai_globs_skip``: both leave a path out whatever the kind globs say)."""
        return cls({kind: getattr(settings, f"ai_globs_{kind}") for kind in KINDS},
                   tuple(settings.ai_globs_exclude) + tuple(settings.ai_globs_skip))

    def _patterns(self) -> tuple[list, re.Pattern[str] | None]:
        """``([(kind, regex)], exclusion regex or None)``, compiled once."""
        if self._compiled is None:
            rules = [(kind, rx) for kind in KINDS
                     if (rx := compile_globs(self._globs.get(kind, ()))) is not None]
            self._compiled = (rules, compile_globs(self._exclude_globs))
        return self._compiled

    def excluded(self, path: str) -> bool:
        """Whether ``path`` matches the exclusion globs (never documentation, whatever else)."""
        exclude = self._patterns()[1]
        return bool(exclude and exclude.match(path))

    def kind_of(self, path: str) -> str | None:
        """The kind of repository-relative ``path``, or None when it is not documentation."""
        if self.excluded(path):
            return None
        for kind, rx in self._patterns()[0]:
            if rx.match(path):
                return kind
        return None


# An interpreter line naming a language whose scripts carry comment headers.
_SHEBANG = re.compile(rb"^#![ \t]*\S*/(?:env[ \t]+(?:-\S+[ \t]+)*)?"
                      rb"(?:sh|bash|dash|ksh|zsh|ash|python[0-9.]*|perl|php|ruby)(?:[ \t]|$)")


def could_be_script(entry: TrackedPath) -> bool:
    """Whether a tracked path no glob recognises may still be a script: a file without an
    extension, or an executable one (git mode ``100755``); never a submodule."""
    name = entry.path.rsplit("/", 1)[-1]
    return entry.mode != GITLINK_MODE and ("." not in name.lstrip(".") or entry.mode == "100755")


def shebang_kind(root: Path, entry: TrackedPath,
                 st: FileStat | None = None) -> str | None:
    """``"header"`` for a tracked script that no glob can recognise by name
    (``could_be_script``) whose first line is a shebang for sh, bash, python, perl, php or
    ruby (``#!/bin/sh -e``, ``#!/usr/bin/env python3``); else None.

    ``st``: the path's ``lstat_entry`` result when the caller already has it.
    Reads at most 128 bytes, never through a symbolic link (``lstat_entry``, ``open_tracked``).
    """
    if not could_be_script(entry):
        return None
    if st is None:
        st, reason = lstat_entry(root, entry)
        if reason or st is None:
            return None
    try:
        with open_tracked(root, entry.path, st) as fh:
            first = fh.read(128).split(b"\n", 1)[0]
    except OSError:
        return None
    return "header" if _SHEBANG.match(first) else None


# ---------------------------------------------------------------------------------------------
# Disk checks and decoding
# ---------------------------------------------------------------------------------------------

def is_valid_name(path: str) -> bool:
    """True when ``path`` is valid Unicode (it can be stored as text and shown)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable_name(path: str) -> str:
    """``path`` with undecodable bytes shown as ``\\xNN`` escapes (storable, loggable)."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def check_symlink(root: Path, path: str) -> str:
    """The skip reason for a tracked symbolic link: outside the repository or not."""
    try:
        target = (root / path).resolve()
        target.relative_to(root.resolve())
    except (ValueError, OSError, RuntimeError):
        return REASON_SYMLINK_OUT
    return REASON_SYMLINK_IN


def resolves_as_tracked(root: Path, path: str, folders: dict[str, str] | None = None) -> str:
    """The skip reason when a parent folder of ``path`` is a symbolic link, else ``""``.

    ``path``'s folder must resolve (``os.path.realpath``, every component) to the same folder
    under the resolved repository root: a folder replaced by a link to a git-ignored folder or
    to one outside the repository would otherwise hand over a file git does not track.
    ``folders``: ``{folder: reason}`` kept across one listing's paths, so each folder is
    resolved once (a read checks again, uncached: ``open_tracked``).
    """
    parent = os.path.dirname(path)
    if not parent:
        return ""
    if folders is not None and parent in folders:
        return folders[parent]
    reason = _folder_reason(root, parent)
    if folders is not None:
        folders[parent] = reason
    return reason


def _folder_reason(root: Path, parent: str) -> str:
    real_root = os.path.realpath(root)
    real_parent = os.path.realpath(os.path.join(real_root, parent))
    if real_parent == os.path.join(real_root, os.path.normpath(parent)):
        return ""
    inside = os.path.commonpath([real_root, real_parent]) == real_root
    return REASON_PARENT_LINK_IN if inside else REASON_PARENT_LINK_OUT


def open_tracked(root: Path, path: str, expected: FileStat | os.stat_result | None = None):
    """Open a tracked regular file for binary reading, never through a symbolic link.

    ``O_NOFOLLOW`` refuses a link in the last component; the parent folders are checked again
    (``resolves_as_tracked``); with ``expected`` (the ``lstat_entry`` result) the opened file
    must be that same inode, so a swap between the check and the read is refused.

    Raises:
        OSError: the file cannot be opened, or it is no longer the checked tracked file
            (``errno.ELOOP`` with a message naming the reason).
    """
    reason = resolves_as_tracked(root, path)
    if reason:
        raise OSError(errno.ELOOP, reason)
    fd = os.open(os.path.join(root, path), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or (
            expected is not None and (st.st_ino, st.st_dev) != (expected.st_ino, expected.st_dev)):
        os.close(fd)
        raise OSError(errno.ELOOP, "the file changed between the check and the read")
    return os.fdopen(fd, "rb")


class FileStat(NamedTuple):
    """The fields of an ``os.stat_result`` an index run keeps per tracked file (sizes in
    bytes, times in ns): a run lists every file, and a full ``stat_result`` costs some
    three times the memory."""

    st_mode: int
    st_size: int
    st_mtime_ns: int
    st_ctime_ns: int
    st_ino: int
    st_dev: int


def lstat_entry(root: Path, entry: TrackedPath, folders: dict[str, str] | None = None
                ) -> tuple[FileStat | None, str]:
    """``os.lstat`` a tracked entry and say whether it can be read as a document.

    Returns ``(FileStat, "")`` for a regular file of at most ``MAX_DOCUMENT_BYTES``;
    ``(None, REASON_MISSING)`` when it is gone from the work tree; otherwise
    ``(FileStat or None, reason)`` with the skip reason. ``folders``: as
    ``resolves_as_tracked`` takes it.
    """
    if entry.mode == GITLINK_MODE:
        return None, REASON_SUBMODULE
    try:
        full = os.lstat(root / entry.path)
        st = FileStat(full.st_mode, full.st_size, full.st_mtime_ns, full.st_ctime_ns,
                      full.st_ino, full.st_dev)
    except FileNotFoundError:
        return None, REASON_MISSING
    except NotADirectoryError:  # a parent folder was replaced by a file
        return None, REASON_MISSING
    except OSError as exc:
        return None, f"{REASON_UNREADABLE}: {exc.strerror or exc}"
    if stat.S_ISLNK(st.st_mode):
        return st, check_symlink(root, entry.path)
    reason = resolves_as_tracked(root, entry.path, folders)
    if reason:
        return None, reason
    if not stat.S_ISREG(st.st_mode):
        return st, REASON_NOT_REGULAR
    if st.st_size > MAX_DOCUMENT_BYTES:
        return st, REASON_TOO_LARGE
    return st, ""


class Decoded(NamedTuple):
    """A decoded document.

    Attributes:
        text: the text with ``\\n`` line endings and no BOM; None when binary.
        encoding: ``utf-8``, ``utf-8-sig``, ``cp1252`` or ``latin-1``; ``binary`` when skipped.
        warning: a message for the log when the file needed a fallback, else empty.
        masked: ``(line, what)`` per value the indexer masked as a secret before chunking
            (``varaverk.masking.documents.mask_secrets``); empty as decoded.
    """

    text: str | None
    encoding: str
    warning: str = ""
    masked: tuple = ()


def normalise_newlines(text: str) -> str:
    """CRLF and lone CR become LF."""
    if "\r" not in text:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


def decode(data: bytes) -> Decoded:
    """Decode a document's bytes.

    NUL in the first 8 KiB → binary (``text=None``). Otherwise UTF-8 (BOM stripped); on
    failure cp1252, then latin-1 (which cannot fail), each with a warning. Line endings are
    normalised. No byte is ever silently dropped.
    """
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        return Decoded(None, "binary", REASON_BINARY)
    try:
        if data.startswith(b"\xef\xbb\xbf"):
            return Decoded(normalise_newlines(data[3:].decode("utf-8")), "utf-8-sig")
        return Decoded(normalise_newlines(data.decode("utf-8")), "utf-8")
    except UnicodeDecodeError as exc:
        bad = f"invalid UTF-8 at byte {exc.start}"
    for fallback in ("cp1252", "latin-1"):
        try:
            text = data.decode(fallback)
        except UnicodeDecodeError:
            continue
        if text.startswith("\ufeff"):
            text = text[1:]
        return Decoded(normalise_newlines(text), fallback,
                       f"{bad}; decoded as {fallback} (a legacy 8-bit encoding)")
    raise AssertionError("latin-1 decodes every byte")  # pragma: no cover
