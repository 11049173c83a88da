"""Capabilities beyond retrieval: what a profile may read on this host, each behind the gate.

Every capability is a small function that calls ``profile.require(NAME)`` first, so a profile
that does not hold it raises ``CapabilityDenied`` whatever the question asks for:

  =================  ===============================================  ==========================
  capability         function                                         reads
  =================  ===============================================  ==========================
  ``scoped_log``     ``scoped_log.read_log`` / ``list_logs``          the open log, under
                                                                      AI_TROUBLESHOOT_LOG_DIRS
  ``live_health``    ``health.live_health``                           psutil, systemctl, docker
  ``run_evidence``   ``run_evidence.run_evidence``                    AI_RUN_STATUS_DIR, job logs
  ``incidents``      ``incidents.recent_incidents``                   AI_INCIDENTS_LOG
  ``conf_lookup``    ``conf_lookup.conf_lookup``                      master.conf, whitelisted
  ``bug_filing``     ``bug_filing.draft_bug_report`` / ``save_...``   writes AI_DATA_DIR/bug_reports
  =================  ===============================================  ==========================

``gather_context(profile, request, settings)`` is what the worker calls for a turn: it runs
the reading capabilities the profile holds and returns prompt blocks, what was read and
extra retrieval queries. Everything it returns is scrubbed of the host's secret values
(``varaverk.host_secrets``). For a profile holding none of them (``chat``, ``varaverk``,
``code``) it returns an empty context without touching anything.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from varaverk.answering.profiles import (CONF_LOOKUP, INCIDENTS, LIVE_HEALTH, RUN_EVIDENCE,
                                         SCOPED_LOG, CapabilityDenied)
from varaverk.host_secrets import conf_path, known_secrets
from varaverk.masking.scrubbing import scrub

from .bug_filing import BugReportInvalid, draft_bug_report, save_bug_report
from .conf_lookup import ConfKeyNotAllowed, ConfValue, conf_block, conf_lookup, keys_in_text
from .health import HealthReport, live_health
from .incidents import recent_incidents
from .run_evidence import run_evidence, run_evidence_block
from .scoped_log import (LogAccessDenied, LogExcerpt, LogNotFound, issue_queries, list_logs,
                         read_log)

__all__ = [
    "CapabilityContext", "gather_context", "CapabilityDenied", "CONTEXT_CAPABILITIES",
    "read_log", "list_logs", "LogExcerpt", "LogAccessDenied", "LogNotFound", "issue_queries",
    "live_health", "HealthReport", "run_evidence", "recent_incidents", "conf_lookup",
    "ConfValue", "ConfKeyNotAllowed", "draft_bug_report", "save_bug_report",
    "BugReportInvalid", "scrub", "known_secrets",
]

log = logging.getLogger("varaverk.answering.capabilities")

# The capabilities that add evidence to a prompt (bug filing is an action, not evidence).
CONTEXT_CAPABILITIES = (SCOPED_LOG, LIVE_HEALTH, RUN_EVIDENCE, INCIDENTS, CONF_LOOKUP)


@dataclass
class CapabilityContext:
    """What the capabilities of one turn contributed.

    Attributes:
        blocks: labelled prompt context blocks, e.g. ``[log lines 120-180 of /var/log/x.log]``
            followed by numbered lines; the log comes first (troubleshoot reasons from it).
        used: what was read, one dict each: {"capability", "source", "summary"} plus
            "lines": [first, last] for a log excerpt, "keys" for conf lookup, "error" when
            a capability could not read its source.
        queries: error and warning lines of the log, as extra retrieval queries.
    """

    blocks: list[str] = field(default_factory=list)
    used: list[dict] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.blocks or self.used or self.queries)


def _scrubbed(ctx: CapabilityContext, known: tuple[str, ...]) -> CapabilityContext:
    def clean(value):
        if isinstance(value, str):
            return scrub(value, known)
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        return value
    return CapabilityContext([clean(b) for b in ctx.blocks], [clean(u) for u in ctx.used],
                             [clean(q) for q in ctx.queries])


def gather_context(profile, request, settings) -> CapabilityContext:
    """Evidence for one turn from the reading capabilities ``profile`` holds.

    Args:
        profile: a ``varaverk.answering.profiles.Profile``.
        request: the worker's ``TurnRequest`` (``question``, ``log_path``).
        settings: ``varaverk.config.Settings``.

    A capability that fails (an unreadable log, a broken status file) contributes a block
    saying so and a ``used`` entry with "error"; the others still run. Never raises for a
    profile without these capabilities: it gets an empty context and nothing is read.
    """
    ctx = CapabilityContext()
    if not any(profile.holds(c) for c in CONTEXT_CAPABILITIES):
        return ctx
    question = str(getattr(request, "question", "") or "")
    log_path = getattr(request, "log_path", None)
    issue_lines: list[str] = []

    if profile.holds(SCOPED_LOG) and log_path:
        try:
            excerpts = read_log(profile, settings, log_path)
        except (LogAccessDenied, LogNotFound, OSError) as exc:
            log.warning("scoped log: %s", exc)
            ctx.blocks.append(f"[log {log_path}: not read]\n{exc}")
            ctx.used.append({"capability": SCOPED_LOG, "source": str(log_path),
                             "error": str(exc), "summary": f"log not read: {exc}"})
        else:
            for ex in excerpts:
                ctx.blocks.append(ex.block())
                ctx.used.append({"capability": SCOPED_LOG, "source": str(ex.path),
                                 "lines": [ex.first_line, ex.last_line], "summary": ex.label})
                issue_lines.extend(text for _, text in ex.issues)
            ctx.queries = issue_queries(excerpts)

    def attempt(name: str, source: str, fn) -> None:
        try:
            fn()
        except CapabilityDenied:
            raise
        except Exception as exc:  # one broken source must not cost the others
            log.warning("%s: %s", name, exc)
            ctx.used.append({"capability": name, "source": source, "error": str(exc),
                             "summary": f"{name.replace('_', ' ')} not read: {exc}"})

    if profile.holds(LIVE_HEALTH):
        def health():
            report = live_health(profile, settings)
            ctx.blocks.append(report.block())
            ctx.used.append({"capability": LIVE_HEALTH, "source": report.host,
                             "summary": f"live health of {report.host}: load, memory, "
                                        f"{len(report.disks)} disks, "
                                        f"{len(report.services)} services"})
        attempt(LIVE_HEALTH, settings.ai_host_name, health)

    if profile.holds(RUN_EVIDENCE) and settings.ai_run_jobs:
        def runs():
            results = run_evidence(profile, settings)
            ctx.blocks.append(run_evidence_block(results))
            ctx.used.append({"capability": RUN_EVIDENCE,
                             "source": ", ".join(r.source or r.job for r in results),
                             "summary": "last runs of " + ", ".join(r.job for r in results)})
        attempt(RUN_EVIDENCE, " ".join(settings.ai_run_jobs), runs)

    if profile.holds(INCIDENTS) and settings.ai_incidents_log is not None:
        def incidents():
            excerpt = recent_incidents(profile, settings)
            if excerpt is not None:
                ctx.blocks.append(excerpt.block())
                ctx.used.append({"capability": INCIDENTS, "source": str(excerpt.path),
                                 "summary": f"the last {len(excerpt.entries)} incidents"})
        attempt(INCIDENTS, str(settings.ai_incidents_log), incidents)

    if profile.holds(CONF_LOOKUP) and settings.ai_conf_read_keys:
        def conf():
            keys = keys_in_text(settings, "\n".join([question, *issue_lines]))
            if not keys:
                return
            values = [conf_lookup(profile, settings, k) for k in keys]
            ctx.blocks.append(conf_block(values))
            ctx.used.append({"capability": CONF_LOOKUP, "source": str(conf_path(settings)),
                             "keys": keys, "summary": "configuration: " + ", ".join(keys)})
        attempt(CONF_LOOKUP, "master.conf", conf)

    return _scrubbed(ctx, known_secrets(settings))
