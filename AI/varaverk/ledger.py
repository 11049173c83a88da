"""The token ledger: one pipe-delimited line per completed ask, one file per host.

Row format (8 fields, 7 ``|`` separators, one line each, UTF-8)::

    date|time|host|profile|source|prompt_tokens|completion_tokens|tok_s
    2025-01-02|10:15:00|hostA|varaverk|cli||12|20.0

- ``date`` ``YYYY-MM-DD`` and ``time`` ``HH:MM:SS`` are UTC, so ledgers of hosts in different
  time zones total consistently.
- ``prompt_tokens`` / ``completion_tokens`` are whole numbers, or empty when the model server did
  not report them: empty means *unknown*, never 0, and totals count unknowns separately.
- ``tok_s`` is generation speed in tokens per second with one decimal, or empty.

This module is the one home of the format: ``ai-query`` (source ``cli``), the dock (source
``webgui``), ``ai-token-sync`` and the dock's token panel all go through it.

Writers (``append_row``) never rewrite the file on an ordinary append: each row goes out as a
single ``os.write`` of the whole encoded line on an ``O_APPEND`` descriptor under ``fcntl.flock``,
so a concurrent CLI writer and dock writer cannot interleave. Pruning to the newest
``retain_rows`` happens on write, only once the file passes a size threshold, atomically (temp
file + ``os.replace``) under the same lock; an appender that waited on the lock notices the file
was replaced and re-opens it, so no concurrent append is lost.

Readers (``read_rows``) skip malformed lines and report each one as ``file:line: reason``. Fleet
totals (``fleet_totals``) combine this host's ledger with the partner ledgers ``ai-token-sync``
cached under ``AI_TOKEN_CACHE_DIR``; a file only ever counts the rows of its own host.
"""

from __future__ import annotations

import datetime as dt
import errno
import functools
import fcntl
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from dotenv import dotenv_values

from varaverk.atomic_files import write_atomic
from varaverk.errors import VaraverkError

FIELDS = ("date", "time", "host", "profile", "source", "prompt_tokens", "completion_tokens",
          "tok_s")
SEPARATOR = "|"
DEFAULT_RETAIN_ROWS = 20000
# Bytes per retained row before a prune is considered. A typical row is 45-70 bytes, so the file
# grows to roughly twice its pruned size between prunes: one rewrite per ~15k appends.
PRUNE_BYTES_PER_ROW = 128
CACHE_SUFFIX = ".tokens.db"
PERIODS = ("today", "last_7_days", "all_time")
NOT_COLLECTED = "not collected here"

_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIME_RE = re.compile(r"\d{2}:\d{2}:\d{2}")
# Field bounds: a partner's ledger is untrusted input, and Python refuses to turn more than
# 4,300 digits into an int (or back into text), which broke the sync and /api/tokens.
MAX_COUNT_DIGITS = 12    # a trillion tokens in one completion is already impossible
MAX_NAME_CHARS = 100
_INT_RE = re.compile(r"\d+")
_FLOAT_RE = re.compile(r"\d{1,9}(\.\d{1,6})?")
_SLOT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_NAME = r"([^|\x00-\x1f\x7f]{1,%d})" % MAX_NAME_CHARS
# The whole well-formed line in one match: the reader's fast path (a ledger is mostly good lines).
_LINE_RE = re.compile(r"(\d{4}-\d{2}-\d{2})\|(\d{2}:\d{2}:\d{2})\|" + _NAME + r"\|" + _NAME
                      + r"\|" + _NAME + r"\|(\d{0,%d})\|(\d{0,%d})\|(\d{1,9}(?:\.\d{1,6})?|)"
                      % (MAX_COUNT_DIGITS, MAX_COUNT_DIGITS))


class LedgerError(VaraverkError, ValueError):
    """A row or line that does not fit the ledger format; the message says which field and why."""

    kind = "ledger"


@dataclass(frozen=True)
class LedgerRow:
    """One completed ask.

    Args:
        date: UTC day, ``YYYY-MM-DD``.
        time: UTC time of day, ``HH:MM:SS``.
        host: the host that answered (``AI_HOST_NAME``).
        profile: the profile asked (``varaverk``, ``chat``, ...).
        source: where the ask came from (``cli``, ``webgui``).
        prompt_tokens: prompt tokens, ``None`` when unknown.
        completion_tokens: completion tokens, ``None`` when unknown.
        tok_s: generation speed in tokens per second, ``None`` when unknown.
    """

    date: str
    time: str
    host: str
    profile: str
    source: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tok_s: float | None = None

    @property
    def day(self) -> dt.date:
        """The row's date as a ``datetime.date``."""
        return dt.date.fromisoformat(self.date)


# ── formatting and parsing ──────────────────────────────────────────────────────────────────

def _shown(value: str) -> str:
    """``value`` for an error message: repr, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:36]}... ({len(str(value))} characters)"


def _check_name(name: str, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise LedgerError(f"{what}: must be a non-empty string, got {_shown(name)}")
    if len(name) > MAX_NAME_CHARS:
        raise LedgerError(f"{what}: longer than {MAX_NAME_CHARS} characters, "
                          f"got {_shown(name)}")
    if SEPARATOR in name:
        raise LedgerError(f"{what}: must not contain '|', got {_shown(name)}")
    if _CONTROL_RE.search(name):
        raise LedgerError(f"{what}: must not contain a newline or control character, "
                          f"got {_shown(name)}")
    if name != name.strip():
        raise LedgerError(f"{what}: must not start or end with white space, "
                          f"got {_shown(name)}")
    return name


def _check_iso(value: str, column: str, shape: re.Pattern[str], layout: str, parse,
               meaning: str) -> str:
    """``value`` when it has the ``shape`` (spelt ``layout``) and ``parse`` accepts it;
    raises LedgerError naming the ``column`` otherwise."""
    if not isinstance(value, str) or not shape.fullmatch(value):
        raise LedgerError(f"{column}: expected {layout}, got {_shown(value)}")
    try:
        parse(value)
    except ValueError:
        raise LedgerError(f"{column}: not {meaning}: {value!r}") from None
    return value


@functools.lru_cache(maxsize=4096)  # a ledger repeats its dates: parse each once per process
def _check_date(value: str) -> str:
    return _check_iso(value, "date", _DATE_RE, "YYYY-MM-DD", dt.date.fromisoformat,
                      "a calendar day")


def _check_time(value: str) -> str:
    return _check_iso(value, "time", _TIME_RE, "HH:MM:SS", dt.time.fromisoformat,
                      "a time of day")


def _format_count(value: int | None, what: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise LedgerError(f"{what}: expected a whole number >= 0 or None, got {value!r}")
    if value >= 10 ** MAX_COUNT_DIGITS:
        raise LedgerError(f"{what}: more than {MAX_COUNT_DIGITS} digits")
    return str(value)


def format_tok_s(value: float | None) -> str:
    """``tok_s`` as written: one decimal (``20.0``), or empty for None / non-finite / negative."""
    if value is None:
        return ""
    value = float(value)
    if not math.isfinite(value) or value < 0:
        return ""
    return f"{value:.1f}"


def format_row(row: LedgerRow) -> str:
    """The ledger line for ``row``, without the trailing newline.

    Raises:
        LedgerError (a ValueError): a host, profile or source that is empty or holds ``|``, a
            newline or another control character (rejected, never escaped, so every line a
            reader sees is exactly the row that was meant); a bad date, time or count.
    """
    parts = [
        _check_date(row.date),
        _check_time(row.time),
        _check_name(row.host, "host"),
        _check_name(row.profile, "profile"),
        _check_name(row.source, "source"),
        _format_count(row.prompt_tokens, "prompt_tokens"),
        _format_count(row.completion_tokens, "completion_tokens"),
        format_tok_s(row.tok_s),
    ]
    return SEPARATOR.join(parts)


def _parse_count(value: str, what: str) -> int | None:
    if value == "":
        return None
    if not _INT_RE.fullmatch(value):
        raise LedgerError(f"{what}: expected a whole number or empty, got {_shown(value)}")
    if len(value) > MAX_COUNT_DIGITS:
        raise LedgerError(f"{what}: {len(value)} digits, more than {MAX_COUNT_DIGITS}")
    return int(value)


def _parse_tok_s(value: str) -> float | None:
    if value == "":
        return None
    if not _FLOAT_RE.fullmatch(value):
        raise LedgerError(f"tok_s: expected a number of at most 9 digits (and 6 decimals) or "
                          f"empty, got {_shown(value)}")
    return float(value)


def parse_line(line: str) -> LedgerRow:
    """Parse one ledger line (a trailing ``\\n`` or ``\\r\\n`` is allowed).

    Raises:
        LedgerError: wrong number of fields, a bad date or time, an empty or invalid
            host/profile/source, a count that is not a whole number, a ``tok_s`` that is not a
            plain non-negative number. The message names the field.
    """
    if line.endswith("\n"):
        line = line[:-1]
        if line.endswith("\r"):
            line = line[:-1]
    match = _LINE_RE.fullmatch(line)
    if match:
        date, time, host, profile, source, prompt, completion, tok_s = match.groups()
        if (host == host.strip() and profile == profile.strip()
                and source == source.strip()):
            _check_date(date)
            _check_time(time)
            return LedgerRow(date, time, host, profile, source,
                             int(prompt) if prompt else None,
                             int(completion) if completion else None,
                             float(tok_s) if tok_s else None)
    # Slow path: field by field, so the error names the field that is wrong.
    parts = line.split(SEPARATOR)
    if len(parts) != len(FIELDS):
        raise LedgerError(f"expected {len(FIELDS)} fields separated by '|', found {len(parts)}")
    date, time, host, profile, source, prompt, completion, tok_s = parts
    return LedgerRow(
        date=_check_date(date),
        time=_check_time(time),
        host=_check_name(host, "host"),
        profile=_check_name(profile, "profile"),
        source=_check_name(source, "source"),
        prompt_tokens=_parse_count(prompt, "prompt_tokens"),
        completion_tokens=_parse_count(completion, "completion_tokens"),
        tok_s=_parse_tok_s(tok_s),
    )


def _utc(moment: dt.datetime) -> dt.datetime:
    # Naive datetimes are taken to be UTC already (the ledger is UTC throughout).
    return moment.astimezone(dt.timezone.utc) if moment.tzinfo else moment


def _count_or_none(value) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number >= 0 else None


def row_from_completion(completion, host: str, profile: str, source: str,
                        now: dt.datetime | None = None) -> LedgerRow:
    """The ledger row for a finished completion (``varaverk.answering.generation.Completion``).

    Args:
        completion: any object with ``prompt_tokens``, ``completion_tokens`` and ``tok_s``
            attributes (missing attributes count as unknown).
        host, profile, source: the row's names (validated here, so a bad name fails before
            anything is written).
        now: the row's time (default: this host's clock, now), written in UTC. The model
            server's ``created_at`` is never used: a server with a wrong clock would move the
            row to another day, and the ledger is this host's record.

    Unknown counts stay ``None`` (an empty field), never 0.
    """
    moment = _utc(now or dt.datetime.now(dt.timezone.utc))
    tok_s = getattr(completion, "tok_s", None)
    try:
        tok_s = float(tok_s) if tok_s is not None else None
    except (TypeError, ValueError):
        tok_s = None
    if tok_s is not None and (not math.isfinite(tok_s) or tok_s < 0):
        tok_s = None
    row = LedgerRow(
        date=moment.strftime("%Y-%m-%d"),
        time=moment.strftime("%H:%M:%S"),
        host=host, profile=profile, source=source,
        prompt_tokens=_count_or_none(getattr(completion, "prompt_tokens", None)),
        completion_tokens=_count_or_none(getattr(completion, "completion_tokens", None)),
        tok_s=tok_s,
    )
    format_row(row)  # validate names now, not at append time
    return row


# ── writing ─────────────────────────────────────────────────────────────────────────────────

def default_prune_threshold(retain_rows: int) -> int:
    """File size in bytes past which an append considers pruning (``retain_rows`` × 128)."""
    return max(retain_rows, 1) * PRUNE_BYTES_PER_ROW


def _open_locked(path: Path) -> int:
    """An O_APPEND descriptor on ``path`` holding an exclusive flock on the current file.

    A pruner replaces the file by rename while we may be waiting on the lock of the old inode;
    after locking we check that the path still names our inode and re-open if not, so the row
    never lands in an unlinked file.
    """
    # O_RDWR, not O_WRONLY: the trailing-newline check preads the last byte.
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
    while True:
        fd = os.open(path, flags, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current = os.stat(path)
            except FileNotFoundError:
                current = None
            mine = os.fstat(fd)
            if current is not None and (current.st_ino, current.st_dev) == (mine.st_ino,
                                                                           mine.st_dev):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # replaced under us: try again on the new file


def append_row(path: str | os.PathLike, row: LedgerRow, *, retain_rows: int | None = DEFAULT_RETAIN_ROWS,
               prune_threshold_bytes: int | None = None) -> None:
    """Append one row to the ledger at ``path`` (created with its folder when missing).

    Args:
        path: the ledger file.
        row: the row; validated first (LedgerError before anything is written).
        retain_rows: keep at most this many newest lines when pruning; ``None`` or 0 never
            prunes (the CLI does not prune).
        prune_threshold_bytes: prune only once the file is larger than this (default
            ``default_prune_threshold(retain_rows)``), so an ordinary append costs one fstat.

    The whole line goes out in one ``os.write`` on an ``O_APPEND`` descriptor under an
    exclusive ``fcntl.flock``. If the file does not end in a newline (a line cut off by a
    crash or a bad copy), a newline is written first in the same call, so the broken line stays
    broken on its own and this row stays whole. Raises OSError when the write fails or is short.
    """
    data = (format_row(row) + "\n").encode("utf-8")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _open_locked(path)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(errno.EIO, f"short write to ledger {path}: {written} of {len(data)} bytes")
        size += written
        if retain_rows:
            threshold = (prune_threshold_bytes if prune_threshold_bytes is not None
                         else default_prune_threshold(retain_rows))
            if size > threshold:
                _prune_locked(path, fd, retain_rows)
    finally:
        os.close(fd)  # releases the flock


def _prune_locked(path: Path, fd: int, retain_rows: int) -> bool:
    """Keep the newest ``retain_rows`` lines; the caller holds the flock on ``fd``.

    Lines are kept byte for byte (malformed ones too: pruning is not the place to judge them).
    Returns True when the file was rewritten.
    """
    with open(path, "rb") as handle:
        lines = handle.read().splitlines(keepends=True)
    if len(lines) <= retain_rows:
        return False
    keep = lines[-retain_rows:]
    # Appenders waiting on the old inode's lock see the rename when they get the lock and
    # re-open the new file (see _open_locked), so their rows are not lost.
    write_atomic(path, b"".join(keep), mode=os.fstat(fd).st_mode & 0o777)
    return True


def read_bytes_locked(path: str | os.PathLike) -> tuple[bytes, os.stat_result]:
    """The whole ledger file and its fstat, read under a shared flock (no half-written row).

    Raises FileNotFoundError when there is no ledger.
    """
    with open(path, "rb") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_SH)
        data = handle.read()
        return data, os.fstat(handle.fileno())


# ── reading ─────────────────────────────────────────────────────────────────────────────────

def parse_text(data: bytes, name: str, host: str | None = None
               ) -> tuple[list[LedgerRow], list[str]]:
    """Parse a ledger's bytes; see ``read_rows``. ``name`` labels problems (``name:line: ...``)."""
    rows: list[LedgerRow] = []
    problems: list[str] = []
    foreign: dict[str, list[int]] = {}
    lines = data.split(b"\n")
    complete = len(lines) - 1  # the last piece has no newline after it
    for number, raw in enumerate(lines, start=1):
        if number > complete:
            if raw:
                problems.append(f"{name}:{number}: truncated line (no end of line), skipped")
            break
        if not raw.strip():
            problems.append(f"{name}:{number}: empty line, skipped")
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            problems.append(f"{name}:{number}: not UTF-8, skipped")
            continue
        try:
            row = parse_line(text)
        except LedgerError as exc:
            problems.append(f"{name}:{number}: {exc}, skipped")
            continue
        if host is not None and row.host != host:
            foreign.setdefault(row.host, []).append(number)
            continue
        rows.append(row)
    for other, numbers in sorted(foreign.items()):
        # One report per foreign host: a ledger copied into the wrong slot would otherwise
        # flood the panel with thousands of identical lines.
        problems.append(f"{name}:{numbers[0]}: {len(numbers)} row(s) of host {other!r} in the "
                        f"ledger of {host!r}, not counted")
    return rows, problems


def read_rows(path: str | os.PathLike, host: str | None = None
              ) -> tuple[list[LedgerRow], list[str]]:
    """Read a ledger file.

    Args:
        path: the ledger (a missing file reads as no rows and no problems).
        host: when given, only rows whose host column equals it are returned; rows of other
            hosts are reported once per host (a partner file contributes only its slot's rows).

    Returns:
        ``(rows, problems)``: the well-formed rows in file order, and one ``file:line: reason``
        string per skipped line (malformed, not UTF-8, empty, or a last line without newline).
    """
    path = Path(path)
    try:
        data, _ = read_bytes_locked(path)
    except FileNotFoundError:
        return [], []
    return parse_text(data, str(path), host)


# ── totals ──────────────────────────────────────────────────────────────────────────────────

@dataclass
class Tally:
    """Token sums over some rows. Unknown (empty) counts are counted, never summed as 0."""

    rows: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    unknown_prompt: int = 0
    unknown_completion: int = 0

    def add(self, row: LedgerRow) -> None:
        """Count one row."""
        self.rows += 1
        if row.prompt_tokens is None:
            self.unknown_prompt += 1
        else:
            self.prompt_tokens += row.prompt_tokens
        if row.completion_tokens is None:
            self.unknown_completion += 1
        else:
            self.completion_tokens += row.completion_tokens

    def merge(self, other: "Tally") -> None:
        """Add another tally into this one."""
        self.rows += other.rows
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.unknown_prompt += other.unknown_prompt
        self.unknown_completion += other.unknown_completion

    @property
    def total_tokens(self) -> int:
        """Known prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> dict[str, int]:
        """Plain JSON-ready numbers."""
        return {"rows": self.rows, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "total_tokens": self.total_tokens,
                "unknown_prompt": self.unknown_prompt,
                "unknown_completion": self.unknown_completion}


def _periods() -> dict[str, Tally]:
    return {period: Tally() for period in PERIODS}


@dataclass
class Totals:
    """Today / last 7 days / all time, per host and for the fleet.

    Attributes:
        hosts: host -> period -> Tally, for every host whose ledger could be read.
        fleet: period -> Tally over all of ``hosts``.
        not_collected: partner slots with no cached ledger on this host (render as
            "not collected here", never as zero).
        problems: ``file:line: reason`` for every skipped line.
        files: host -> the ledger file its rows came from.
    """

    hosts: dict[str, dict[str, Tally]] = field(default_factory=dict)
    fleet: dict[str, Tally] = field(default_factory=_periods)
    not_collected: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict:
        """JSON-ready form for the dock's token panel."""
        hosts = {host: {p: t.as_dict() for p, t in periods.items()}
                 for host, periods in self.hosts.items()}
        for slot in self.not_collected:
            hosts[slot] = {"status": NOT_COLLECTED}
        return {"hosts": hosts, "fleet": {p: t.as_dict() for p, t in self.fleet.items()},
                "not_collected": list(self.not_collected), "problems": list(self.problems),
                "files": dict(self.files)}


def totals(rows_by_source: Mapping[str, Iterable[LedgerRow]],
           now: dt.datetime | dt.date | None = None) -> Totals:
    """Sum rows per host and for the fleet over today, the last 7 days and all time.

    Args:
        rows_by_source: host -> its rows (already filtered to that host by ``read_rows``).
        now: the reference moment (default now); "today" is its UTC date and "last 7 days" is
            today and the six days before it. Rows dated after today count in all time only.
    """
    if now is None:
        now = dt.datetime.now(dt.timezone.utc)
    today = _utc(now).date() if isinstance(now, dt.datetime) else now
    week_start = today - dt.timedelta(days=6)
    result = Totals()
    for host, rows in rows_by_source.items():
        periods = result.hosts.setdefault(host, _periods())
        for row in rows:
            periods["all_time"].add(row)
            day = row.day
            if week_start <= day <= today:
                periods["last_7_days"].add(row)
                if day == today:
                    periods["today"].add(row)
    for periods in result.hosts.values():
        for period, tally in periods.items():
            result.fleet[period].merge(tally)
    return result


# ── the fleet ───────────────────────────────────────────────────────────────────────────────

def valid_slot(name: str) -> bool:
    """True when ``name`` can be a slot: letters, digits, ``_``, ``.``, ``-`` (a safe file name)."""
    return bool(_SLOT_RE.fullmatch(name)) and ".." not in name


def read_hosts_conf(path: str | os.PathLike) -> dict[str, str]:
    """The fleet's hosts conf: slot name -> partner dock base URL, in file order.

    The file is ``KEY=VALUE`` lines parsed by python-dotenv without interpolation; the slot
    name must equal the partner's ``AI_HOST_NAME`` (its ledger's host column). A missing file
    is an empty fleet. Raises ValueError naming the file for a slot that is not a safe file
    name or a value that is not an http(s) URL.
    """
    path = Path(path)
    if not path.is_file():
        return {}
    hosts: dict[str, str] = {}
    for slot, url in dotenv_values(path, interpolate=False).items():
        url = (url or "").strip()
        if not valid_slot(slot):
            raise ValueError(f"{path}: slot name {slot!r} must be letters, digits, '_', '.', '-'")
        if not (url.startswith("http://") or url.startswith("https://")):
            raise ValueError(f"{path}: {slot}: expected an http:// or https:// URL, got {url!r}")
        hosts[slot] = url.rstrip("/")
    return hosts


def cache_path(cache_dir: str | os.PathLike, slot: str) -> Path:
    """Where ``ai-token-sync`` keeps a partner's ledger: ``<cache_dir>/<slot>.tokens.db``."""
    if not valid_slot(slot):
        raise ValueError(f"invalid slot name {slot!r}")
    return Path(cache_dir) / f"{slot}{CACHE_SUFFIX}"


def partner_slots(settings) -> list[str]:
    """The partner slots of the hosts conf, without this host's own slot.

    One hosts conf can be shared by the whole fleet: each host skips its own name.
    """
    return [slot for slot in read_hosts_conf(settings.hosts_conf_path)
            if slot != settings.ai_host_name]


def fleet_totals(settings, now: dt.datetime | None = None) -> Totals:
    """Totals over this host's ledger and every cached partner ledger.

    Args:
        settings: ``varaverk.config.Settings`` (``token_db_path``, ``ai_host_name``,
            ``ai_token_cache_dir``, ``hosts_conf_path``).
        now: the reference moment for today / last 7 days (default now).

    Each file counts only rows of its own host: this host's ledger its ``AI_HOST_NAME``, a
    partner cache its slot. A partner slot without a cache file is listed in
    ``not_collected``, never counted as zero. Raises ValueError for an invalid hosts conf.
    """
    own = settings.ai_host_name
    own_rows, problems = read_rows(settings.token_db_path, host=own)
    rows_by_host: dict[str, list[LedgerRow]] = {own: own_rows}
    files = {own: str(settings.token_db_path)}
    missing: list[str] = []
    for slot in partner_slots(settings):
        path = cache_path(settings.ai_token_cache_dir, slot)
        if not path.is_file():
            missing.append(slot)
            continue
        rows, slot_problems = read_rows(path, host=slot)
        rows_by_host[slot] = rows
        files[slot] = str(path)
        problems.extend(slot_problems)
    result = totals(rows_by_host, now)
    result.not_collected = missing
    result.problems = problems
    result.files = files
    return result
