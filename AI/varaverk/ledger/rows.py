"""A ledger row and its line format: one pipe-delimited line per completed ask (with the model
turns made for it), or per model turn of background work (``varaverk.ledger.recording``), UTF-8.

Row format (8 fields, 7 ``|`` separators, one line each)::

    date|time|host|profile|source|prompt_tokens|completion_tokens|tok_s
    2025-01-02|10:15:00|hostA|varaverk|cli||12|20.0

- ``date`` ``YYYY-MM-DD`` and ``time`` ``HH:MM:SS`` are UTC, so ledgers of hosts in different
  time zones total consistently.
- ``prompt_tokens`` / ``completion_tokens`` are whole numbers, or empty when the model server did
  not report them: empty means *unknown*, never 0, and totals count unknowns separately.
- ``tok_s`` is generation speed in tokens per second with one decimal, or empty.

This module is the one home of the format: ``ai-query`` (source ``cli``), the dock (source
``webgui``), ``ai-token-sync`` and the dock's token panel all go through it. Parsing skips
nothing silently: ``parse_text`` reports each malformed line as ``file:line: reason``.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import re
from dataclasses import dataclass

from varaverk.errors import VaraverkError

FIELDS = ("date", "time", "host", "profile", "source", "prompt_tokens", "completion_tokens",
          "tok_s")
SEPARATOR = "|"

_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIME_RE = re.compile(r"\d{2}:\d{2}:\d{2}")
# Field bounds: a partner's ledger is untrusted input, and Python refuses to turn more than
# 4,300 digits into an int (or back into text), which broke the sync and /api/tokens.
MAX_COUNT_DIGITS = 12    # a trillion tokens in one completion is already impossible
MAX_NAME_CHARS = 100
_INT_RE = re.compile(r"\d+")
_FLOAT_RE = re.compile(r"\d{1,9}(\.\d{1,6})?")
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


def as_utc(moment: dt.datetime) -> dt.datetime:
    """``moment`` in UTC; a naive one is taken to be UTC already (the ledger is UTC throughout)."""
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
    """The ledger row for a finished completion
    (``varaverk.answering.generation.events.Completion``).

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
    moment = as_utc(now or dt.datetime.now(dt.timezone.utc))
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
