"""Incidents: the most recent entries of the incidents log (``AI_INCIDENTS_LOG``).

Contract: ``recent_incidents(profile, settings, limit=10) -> IncidentsExcerpt | None``
(requires ``incidents``; None when no incidents log is configured). The file is read from
its tail (``MAX_BYTES``). Entry format, by line:
  - JSON lines: an object per line; shown as ``time | severity | host | summary`` from the
    keys found (``time``/``ts``/``date``, ``severity``/``level``, ``host``,
    ``summary``/``message``/``title``);
  - plain text: a line that starts with a date, a ``- ``/``* `` bullet or a ``## `` heading
    starts an entry; the following indented or plain lines belong to it. A file with none
    of those markers has one entry per line.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from varaverk.answering.profiles import INCIDENTS

from .scoped_log import read_excerpt

log = logging.getLogger("varaverk.answering.capabilities")
MAX_BYTES = 32 * 1024
_ENTRY_START = re.compile(r"^(\d{4}-\d\d-\d\d|[A-Z][a-z]{2} [ \d]\d |[-*] |#{1,3} )")


@dataclass
class IncidentsExcerpt:
    """The last entries of the incidents log, oldest first."""

    path: Path
    entries: list[str]

    def block(self) -> str:
        """The prompt context block: a ``[incidents: ...]`` head line, then one ``- entry`` a line."""
        head = f"[incidents: the last {len(self.entries)} entries of {self.path}]"
        if not self.entries:
            return f"{head}\n(no incidents recorded)"
        return head + "\n" + "\n".join(f"- {e}" for e in self.entries)


def _json_entry(obj: dict) -> str:
    def pick(*keys):
        return next((str(obj[k]) for k in keys if obj.get(k) not in (None, "")), "")
    parts = [pick("time", "ts", "timestamp", "date"), pick("severity", "level"), pick("host"),
             pick("summary", "message", "title", "text")]
    return " | ".join(p for p in parts if p) or json.dumps(obj)[:300]


def parse_entries(lines: list[str]) -> list[str]:
    """Entries from incidents log lines (see the module docstring)."""
    entries: list[str] = []
    structured = any(_ENTRY_START.match(l) for l in lines)
    for line in lines:
        if not line.strip():
            continue
        stripped = line.strip()
        if stripped.startswith("{"):
            try:
                obj = json.loads(stripped)
            except ValueError:
                obj = None
            if isinstance(obj, dict):
                entries.append(_json_entry(obj))
                continue
        if not structured or _ENTRY_START.match(line) or not entries:
            entries.append(stripped.lstrip("-* ").strip())
        else:
            entries[-1] = f"{entries[-1]} {stripped}"
    return [e[:500] for e in entries]


def recent_incidents(profile, settings, limit: int = 10) -> IncidentsExcerpt | None:
    """The last ``limit`` incidents. Requires ``incidents``; None when none is configured."""
    profile.require(INCIDENTS)
    path = settings.ai_incidents_log
    if path is None:
        return None
    path = Path(path)
    if not path.is_file():
        log.warning("incidents: %s does not exist", path)
        return IncidentsExcerpt(path, [])
    excerpt = read_excerpt(path, MAX_BYTES, max_lines=10_000)
    entries = parse_entries(excerpt.lines)[-limit:]
    log.info("incidents: read %d entries of %s", len(entries), path)
    return IncidentsExcerpt(path, entries)
