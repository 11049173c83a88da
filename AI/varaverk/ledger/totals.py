"""Token totals: today, the last 7 days and all time, per host and for the fleet.

Unknown (empty) counts are counted apart, never summed as 0.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from varaverk.ledger.rows import LedgerRow, as_utc

PERIODS = ("today", "last_7_days", "all_time")
NOT_COLLECTED = "not collected here"


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
    today = as_utc(now).date() if isinstance(now, dt.datetime) else now
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
