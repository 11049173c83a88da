"""Scoped log: the tail of the log the user has open, read only from the configured folders.

Contract:
  ``resolve_log(settings, requested) -> Path``: the real path of a regular file under one of
  ``AI_TROUBLESHOOT_LOG_DIRS`` (both sides resolved, so neither ``../`` nor a symlink can lead
  out); raises ``LogAccessDenied`` (outside, traversal, not a regular file, unreadable) or
  ``LogNotFound``.
  ``read_log(profile, settings, requested, max_bytes=..., max_lines=...) -> LogExcerpt``:
  the tail within the byte budget, decoded robustly, numbered with the file's own line
  numbers, plus the error and warning lines found in it.
  ``list_logs(profile, settings) -> list[dict]``: readable logs for the dock's log picker.

Decoding: NUL bytes are dropped, undecodable bytes become U+FFFD, other control characters
become ``?``, and a line that is mostly binary is shown as ``[binary data, N bytes]``.
Rotation: ``x.log.1`` and ``x.log.2.gz`` open like any log (gzip is decompressed in a stream);
when the open log holds fewer than ``ROTATED_FALLBACK_LINES`` lines (it was just rotated), the
tail of the previous rotation is read as well, as its own excerpt.
"""

from __future__ import annotations

import gzip
import logging
import os
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from varaverk.answering.profiles import SCOPED_LOG

log = logging.getLogger("varaverk.answering.capabilities")

MAX_BYTES = 16 * 1024          # tail budget of one excerpt (about 4k tokens at most)
MAX_LINES = 200                # and at most this many lines
MAX_LINE_CHARS = 400           # a longer line is cut (minified JSON, stack dumps)
ROTATED_FALLBACK_LINES = 20    # fewer lines than this: also read the previous rotation
MAX_QUERIES = 5
_COUNT_CHUNK = 1 << 20
_LOG_NAME = re.compile(r"(\.log|\.txt|\.out|\.err|\.json|\.log\.\d+|\.\d+|\.gz)$", re.I)

ISSUE_PATTERN = re.compile(
    r"\b(ERROR|ERR|WARN(ING)?|FATAL|CRIT(ICAL)?|EMERG(ENCY)?|ALERT|PANIC|SEVERE|"
    r"fail(s|ed|ure|ing)?|denied|refused|forbidden|unreachable|timed?[ -]?out|"
    r"Traceback|Exception|segfault|oom[- ]?kill(er|ed)?|out of memory|No space left|"
    r"No such file|cannot|can't|unable to|abort(ed)?|not found|I/O error|corrupt\w*|"
    r"exit(ed)?( with)?( code| status)? ?[1-9]\d*)\b", re.I)


SEVERE_PATTERN = re.compile(r"\b(ERROR|ERR|FATAL|CRIT(ICAL)?|EMERG(ENCY)?|ALERT|PANIC|SEVERE|"
                            r"Traceback|Exception|segfault|oom)\b", re.I)


class LogAccessDenied(PermissionError):
    """The requested log lies outside the configured folders or is not a readable file."""


class LogNotFound(FileNotFoundError):
    """The requested log does not exist under the configured folders."""


@dataclass
class LogExcerpt:
    """A numbered tail of one log file.

    Attributes:
        path: the resolved path read.
        first_line, last_line: 1-based line numbers of the excerpt in the file (0, 0 if empty).
        lines: the decoded lines, ``lines[0]`` being line ``first_line``.
        total_lines: lines in the file.
        truncated: True when the excerpt starts after line 1 (only the tail was read).
        issues: (line number, text) of error and warning lines in the excerpt.
    """

    path: Path
    first_line: int
    last_line: int
    lines: list[str]
    total_lines: int
    truncated: bool
    issues: list[tuple[int, str]] = field(default_factory=list)

    @property
    def label(self) -> str:
        """``log lines 120-180 of /var/log/x.log``: how an answer cites this excerpt."""
        if not self.lines:
            return f"log {self.path} (empty)"
        return f"log lines {self.first_line}-{self.last_line} of {self.path}"

    def block(self) -> str:
        """The prompt context block: a labelled header, then ``N | text`` lines."""
        head = f"[{self.label}]"
        if self.truncated:
            head += f" (the last {len(self.lines)} of {self.total_lines} lines)"
        width = len(str(self.last_line or 1))
        body = "\n".join(f"{n:>{width}} | {text}"
                         for n, text in zip(range(self.first_line, self.last_line + 1), self.lines))
        return f"{head}\n{body}" if body else f"{head}\n(the log is empty)"


def log_dirs(settings) -> list[Path]:
    """The configured log folders, resolved; folders that do not exist are left out."""
    out: list[Path] = []
    for raw in settings.ai_troubleshoot_log_dirs:
        try:
            real = Path(os.path.expanduser(raw)).resolve(strict=True)
        except (OSError, RuntimeError):
            continue
        if real.is_dir() and real not in out:
            out.append(real)
    return out


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def resolve_log(settings, requested: str | os.PathLike) -> Path:
    """The real path of ``requested`` if it is a regular file under a configured log folder.

    A relative path is taken relative to each configured folder in turn. Any ``..``
    component is refused before resolving; the resolved path must still lie under the
    (resolved) folder, so a symlink pointing elsewhere is refused too.

    Raises LogAccessDenied (empty path, ``..``, no folder configured, outside the folders, not
    a regular file, unreadable) or LogNotFound (no such file under any folder).
    """
    raw = os.fspath(requested).strip()
    if not raw or "\x00" in raw:
        raise LogAccessDenied("no log path given")
    if ".." in Path(raw).parts:
        raise LogAccessDenied(f"refused {raw!r}: '..' is not allowed in a log path")
    dirs = log_dirs(settings)
    if not dirs:
        raise LogAccessDenied("no log folder is configured (AI_TROUBLESHOOT_LOG_DIRS)")
    candidates = [Path(raw)] if os.path.isabs(raw) else [d / raw for d in dirs]
    for candidate in candidates:
        try:
            real = candidate.resolve(strict=True)
        except FileNotFoundError:
            continue
        except (OSError, RuntimeError) as exc:  # symlink loops, permission on a parent
            raise LogAccessDenied(f"cannot resolve {raw!r}: {exc}") from None
        if not any(_inside(real, d) for d in dirs):
            raise LogAccessDenied(f"refused {raw!r}: it resolves outside the configured log "
                                  "folders")
        if not real.is_file():
            raise LogAccessDenied(f"refused {raw!r}: not a regular file")
        if not os.access(real, os.R_OK):
            raise LogAccessDenied(f"refused {raw!r}: not readable by this process")
        return real
    raise LogNotFound(f"no such log under the configured folders: {raw}")


# ── decoding ──

def decode_line(raw: bytes) -> str:
    """One log line as text: NULs dropped, bad bytes replaced, binary noise summarised."""
    raw = raw.replace(b"\x00", b"").rstrip(b"\r\n")
    text = raw.decode("utf-8", errors="replace")
    if not text:
        return ""
    noise = sum(1 for ch in text if ch == "\ufffd" or (ord(ch) < 32 and ch != "\t"))
    if len(text) >= 8 and noise / len(text) > 0.3:
        return f"[binary data, {len(raw)} bytes]"
    text = re.sub(r"[\x01-\x08\x0b-\x1f\x7f]", "?", text)
    if len(text) > MAX_LINE_CHARS:
        text = text[:MAX_LINE_CHARS] + f" ...[{len(text) - MAX_LINE_CHARS} more characters]"
    return text


def _count_newlines(fh, end: int) -> int:
    fh.seek(0)
    count, left = 0, end
    while left > 0:
        chunk = fh.read(min(_COUNT_CHUNK, left))
        if not chunk:
            break
        count += chunk.count(b"\n")
        left -= len(chunk)
    return count


def _tail_plain(path: Path, max_bytes: int, max_lines: int) -> tuple[list[bytes], int, int]:
    """(last lines within the budget, 1-based number of the first of them, total lines)."""
    with open(path, "rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        start = max(0, size - max_bytes)
        cut_mid_line = False
        if start > 0:
            fh.seek(start - 1)
            cut_mid_line = fh.read(1) != b"\n"
        fh.seek(start)
        data = fh.read(size - start)
        # Line numbers must be the file's own, so the lines before the tail are counted
        # (a streaming byte count: about a second per GiB from the page cache).
        before = _count_newlines(fh, start) if start else 0
    total = before + data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if cut_mid_line and lines:
        lines.pop(0)
    if len(lines) > max_lines:
        lines = lines[-max_lines:]
    first = total - len(lines) + 1 if lines else 0
    return lines, first, total


def _tail_gzip(path: Path, max_bytes: int, max_lines: int) -> tuple[list[bytes], int, int]:
    """The same for a gzip file, decompressed in a stream (never held whole in memory)."""
    kept: deque[bytes] = deque()
    kept_bytes = 0
    total = 0
    try:
        with gzip.open(path, "rb") as fh:
            for raw in fh:
                total += 1
                kept.append(raw)
                kept_bytes += len(raw)
                while kept and (kept_bytes > max_bytes or len(kept) > max_lines):
                    kept_bytes -= len(kept.popleft())
    except (OSError, EOFError) as exc:  # truncated or not really gzip: keep what was read
        log.warning("scoped log: %s is damaged after line %d (%s)", path, total, exc)
    first = total - len(kept) + 1 if kept else 0
    return list(kept), first, total


def read_excerpt(path: Path, max_bytes: int = MAX_BYTES, max_lines: int = MAX_LINES) -> LogExcerpt:
    """Read the tail of an already resolved log (no capability check: use ``read_log``)."""
    if path.name.endswith(".gz"):
        raw_lines, first, total = _tail_gzip(path, max_bytes, max_lines)
    else:
        raw_lines, first, total = _tail_plain(path, max_bytes, max_lines)
    lines = [decode_line(r) for r in raw_lines]
    issues = [(first + i, text) for i, text in enumerate(lines)
              if ISSUE_PATTERN.search(text) and not text.startswith("[binary data")]
    last = first + len(lines) - 1 if lines else 0
    return LogExcerpt(path, first if lines else 0, last, lines, total,
                      truncated=bool(lines) and first > 1, issues=issues)


def previous_rotation(path: Path) -> Path | None:
    """``x.log.1`` or ``x.log.1.gz`` beside ``x.log`` (the newest rotation), if present."""
    if re.search(r"\.\d+(\.gz)?$", path.name):
        return None
    for name in (f"{path.name}.1", f"{path.name}.1.gz", f"{path.name}.0", f"{path.name}.0.gz"):
        candidate = path.with_name(name)
        if candidate.is_file() and not candidate.is_symlink():
            return candidate
    return None


def read_log(profile, settings, requested: str | os.PathLike, max_bytes: int = MAX_BYTES,
             max_lines: int = MAX_LINES) -> list[LogExcerpt]:
    """Excerpts of the log ``requested`` (and its previous rotation when it was just rotated).

    Requires the ``scoped_log`` capability. Returns the open log's excerpt first. Raises
    CapabilityDenied, LogAccessDenied or LogNotFound.
    """
    profile.require(SCOPED_LOG)
    path = resolve_log(settings, requested)
    excerpt = read_excerpt(path, max_bytes, max_lines)
    log.info("scoped log: read %s", excerpt.label)
    out = [excerpt]
    if len(excerpt.lines) < ROTATED_FALLBACK_LINES:
        older = previous_rotation(path)
        if older is not None:
            try:
                older = resolve_log(settings, older)
            except (LogAccessDenied, LogNotFound):
                older = None
        if older is not None:
            budget = max(1024, max_bytes - sum(len(t) for t in excerpt.lines))
            prev = read_excerpt(older, budget, max_lines - len(excerpt.lines))
            if prev.lines:
                log.info("scoped log: also read %s (the log was just rotated)", prev.label)
                out.append(prev)
    return out


def issue_queries(excerpts: list[LogExcerpt], limit: int = MAX_QUERIES) -> list[str]:
    """Retrieval queries from error and warning lines, de-duplicated.

    Errors (ERROR, FATAL, Traceback...) come before warnings and other failure words, and
    within each the newest line first (the open log before its previous rotation): the
    failure itself is what the documentation most likely explains. Timestamps, PIDs, hex ids
    and long numbers are dropped, so two occurrences of one failure make one query.
    """
    ranked = sorted((0 if SEVERE_PATTERN.search(text) else 1, i, -n, text)
                    for i, excerpt in enumerate(excerpts) for n, text in excerpt.issues)
    seen: set[str] = set()
    out: list[str] = []
    for *_, text in ranked:
        q = re.sub(r"^\S*\d{4}-\d\d-\d\d[T ]?[\d:.,+-]*Z?\s*", "", text)
        q = re.sub(r"^[A-Z][a-z]{2} [ \d]\d [\d:]{8}\s+\S+\s+", "", q)  # syslog prefix
        q = re.sub(r"\[\d+\]|\b0x[0-9a-f]+\b|\b[0-9a-f]{12,}\b|\b\d{5,}\b", "", q, flags=re.I)
        q = re.sub(r"\s+", " ", q).strip(" :-|")
        if len(q) < 6 or q.lower() in seen:
            continue
        seen.add(q.lower())
        out.append(q[:200])
        if len(out) >= limit:
            break
    return out


def list_logs(profile, settings, limit: int = 500) -> list[dict]:
    """Readable logs under the configured folders, newest first, for the dock's picker.

    Each item: {"path", "name", "size", "mtime"} (mtime in epoch seconds). Symlinks that
    lead outside the folders, unreadable files and files that do not look like logs are
    left out. Requires ``scoped_log``.
    """
    profile.require(SCOPED_LOG)
    found: dict[str, dict] = {}
    for folder in log_dirs(settings):
        for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))[:200]
            for name in filenames:
                if not _LOG_NAME.search(name) and "log" not in name.lower():
                    continue
                p = Path(dirpath) / name
                try:
                    real = resolve_log(settings, p)
                    st = real.stat()
                except (LogAccessDenied, LogNotFound, OSError):
                    continue
                found.setdefault(str(real), {"path": str(real), "name": str(real.relative_to(folder))
                                             if _inside(real, folder) else name,
                                             "size": st.st_size, "mtime": int(st.st_mtime)})
            if len(found) >= limit * 4:
                break
    return sorted(found.values(), key=lambda d: (-d["mtime"], d["path"]))[:limit]
