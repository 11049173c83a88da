"""Run evidence: the last runs (start, end, exit code) of the configured jobs.

Contract: ``run_evidence(profile, settings, jobs=None, limit=3) -> list[JobRuns]``
(requires ``run_evidence``). Jobs are ``AI_RUN_JOBS`` (names such as ``rsync_mirror``).
For each job the first source that exists wins:

  1. ``AI_RUN_STATUS_DIR/<job>.status``: one run per line, ``start|end|exit`` —
     ISO 8601 times or epoch seconds; an empty end or exit means "still running" or
     "unknown". Lines starting with ``#`` are comments. Jobs append one line when they end::

         echo "$start|$(date -Is)|$rc" >> "$AI_RUN_STATUS_DIR/rsync_mirror.status"

  2. ``AI_RUN_STATUS_DIR/<job>.json``: an object (or a list of objects) with ``start``,
     ``end`` and ``exit_code`` (``exit`` and ``finished`` are accepted too) and an
     optional ``summary`` — the state files a dashboard tile already reads.
  3. ``<job>.log`` under ``AI_TROUBLESHOOT_LOG_DIRS`` (same scoping as the scoped log): each
     line that reports an exit (``exit 3``, ``exited with code 3``, ``exit status 3``) ends
     a run; the nearest earlier line saying ``start``/``starting``/``begin`` is its start.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from varaverk.answering.profiles import RUN_EVIDENCE

from .scoped_log import LogAccessDenied, LogNotFound, read_excerpt, resolve_log

log = logging.getLogger("varaverk.answering.capabilities")

_JOB_NAME = re.compile(r"^[A-Za-z0-9_.@-]{1,100}$")
_EXIT_LINE = re.compile(r"\bexit(?:ed)?(?: with)?(?: code| status)?[ :=]*(-?\d+)\b", re.I)
_START_LINE = re.compile(r"\b(start(?:ing|ed)?|begin(?:ning)?|launch(?:ing|ed)?)\b", re.I)
_TIMESTAMP = re.compile(r"(\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d)?(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
                        r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d)")
LOG_TAIL_BYTES = 64 * 1024


@dataclass
class Run:
    """One run: times as found (ISO text), exit code as an int or None (unknown)."""

    start: str | None
    end: str | None
    exit_code: int | None
    summary: str = ""
    line: int | None = None  # the log line reporting the exit, when read from a log

    @property
    def outcome(self) -> str:
        """Human wording of the result: "ok (exit 0)", "FAILED (exit N)", or why it is unknown."""
        if self.end is None and self.exit_code is None:
            return "running or no end recorded"
        if self.exit_code is None:
            return "exit code unknown"
        return "ok (exit 0)" if self.exit_code == 0 else f"FAILED (exit {self.exit_code})"


@dataclass
class JobRuns:
    """The last runs of one job, newest last, and where they were read."""

    job: str
    source: str | None
    runs: list[Run] = field(default_factory=list)
    error: str = ""

    def lines(self) -> list[str]:
        """Prompt lines, one per run (start, end, outcome, summary, ``[from source line N]``);
        a single line when there was an error or no run was recorded."""
        if self.error:
            return [f"{self.job}: {self.error}"]
        if not self.runs:
            return [f"{self.job}: no runs recorded ({self.source or 'no status file or log'})"]
        out = []
        for r in self.runs:
            where = f"{self.source}" + (f" line {r.line}" if r.line else "")
            text = f"{self.job}: start {r.start or '?'}, end {r.end or '?'}, {r.outcome}"
            if r.summary:
                text += f" - {r.summary}"
            out.append(f"{text} [from {where}]")
        return out


def _time(raw) -> str | None:
    """ISO text for an ISO string or epoch seconds; None when empty."""
    if raw is None:
        return None
    text = str(raw).strip()
    if not text:
        return None
    if re.fullmatch(r"\d{9,11}(\.\d+)?", text):
        return datetime.fromtimestamp(float(text), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return text[:40]


def _exit(raw) -> int | None:
    try:
        return int(str(raw).strip())
    except (TypeError, ValueError):
        return None


def parse_status_file(text: str) -> list[Run]:
    """Runs from a ``<job>.status`` file (``start|end|exit`` per line)."""
    runs = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = (line.split("|") + ["", "", ""])[:4]
        runs.append(Run(_time(parts[0]), _time(parts[1]), _exit(parts[2]),
                        summary=parts[3].strip()[:200]))
    return runs


def parse_status_json(text: str) -> list[Run]:
    """Runs from a ``<job>.json`` state file (an object or a list of objects)."""
    data = json.loads(text)
    items = data if isinstance(data, list) else [data]
    runs = []
    for item in items:
        if not isinstance(item, dict):
            continue
        code = next((item[k] for k in ("exit_code", "exit", "rc", "status") if k in item), None)
        runs.append(Run(_time(item.get("start") or item.get("started")),
                        _time(item.get("end") or item.get("finished") or item.get("finish_time")),
                        _exit(code), summary=str(item.get("summary") or "")[:200]))
    return runs


def parse_job_log(lines: list[str], first_line: int) -> list[Run]:
    """Runs from a job's log lines: each exit line ends a run, the last start line before it
    (after the previous exit) starts it."""
    runs = []
    start: str | None = None
    for i, text in enumerate(lines):
        m = _EXIT_LINE.search(text)
        stamp = _TIMESTAMP.search(text)
        if m:
            runs.append(Run(start, stamp.group(1) if stamp else None, int(m.group(1)),
                            line=first_line + i))
            start = None
        elif _START_LINE.search(text):
            start = stamp.group(1) if stamp else f"log line {first_line + i}"
    return runs


def job_runs(settings, job: str, limit: int = 3) -> JobRuns:
    """The last ``limit`` runs of one job from the first source that exists.

    Sources, in order: ``AI_RUN_STATUS_DIR/<job>.status``, ``AI_RUN_STATUS_DIR/<job>.json``,
    then ``<job>.log`` under ``AI_TROUBLESHOOT_LOG_DIRS`` (its last ``LOG_TAIL_BYTES``).
    Never raises for a bad name or an unreadable source: the returned JobRuns carries
    ``error`` instead, and no runs with ``source`` None when nothing was found.
    """
    if not _JOB_NAME.match(job):
        return JobRuns(job, None, error="not a valid job name")
    status_dir = settings.ai_run_status_dir
    if status_dir is not None:
        for suffix, parse in ((".status", parse_status_file), (".json", parse_status_json)):
            path = Path(status_dir) / f"{job}{suffix}"
            if path.is_file():
                try:
                    runs = parse(path.read_text(encoding="utf-8", errors="replace"))
                except (OSError, ValueError) as exc:
                    return JobRuns(job, str(path), error=f"cannot read {path}: {exc}")
                return JobRuns(job, str(path), runs[-limit:])
    try:
        path = resolve_log(settings, f"{job}.log")
    except LogNotFound:
        return JobRuns(job, None)
    except LogAccessDenied as exc:
        return JobRuns(job, None, error=str(exc))
    excerpt = read_excerpt(path, LOG_TAIL_BYTES, 2000)
    return JobRuns(job, str(path), parse_job_log(excerpt.lines, excerpt.first_line)[-limit:])


def run_evidence(profile, settings, jobs: list[str] | None = None, limit: int = 3) -> list[JobRuns]:
    """The last runs of ``jobs`` (default ``AI_RUN_JOBS``). Requires ``run_evidence``."""
    profile.require(RUN_EVIDENCE)
    names = list(settings.ai_run_jobs if jobs is None else jobs)
    out = [job_runs(settings, job, limit) for job in names]
    log.info("run evidence: read %d jobs", len(out))
    return out


def run_evidence_block(results: list[JobRuns]) -> str:
    """The prompt context block for run evidence."""
    lines = ["[run evidence: the last runs of the configured jobs, oldest first]"]
    for jr in results:
        lines.extend(jr.lines())
    return "\n".join(lines)
