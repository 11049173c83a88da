"""Bug filing: the troubleshoot profile drafts a bug report; it is written only on confirm.

Contract:
  ``draft_bug_report(profile, settings, *, title, what_happened, log_excerpt="",
  log_source=None) -> dict`` (requires ``bug_filing``): {"title", "what_happened",
  "log_excerpt", "log_source", "versions", "created_at"}, every text scrubbed of secrets.
  ``save_bug_report(settings, draft, confirmed, *, profile) -> Path | None``: nothing is
  written unless ``confirmed`` is True; then the draft is re-validated (it may have come back
  from a browser), scrubbed again and written atomically (temporary file, fsync, rename) as
  Markdown to ``AI_DATA_DIR/bug_reports/<UTC time>-<slug>.md``. Raises ``BugReportInvalid``
  for a malformed draft, CapabilityDenied for a profile without ``bug_filing``.
"""

from __future__ import annotations

import logging
import platform
import re
import secrets as _random
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from varaverk import gitrepo
from varaverk.atomic_files import write_atomic
from varaverk.answering.profiles import BUG_FILING
from varaverk.host_secrets import known_secrets
from varaverk.masking.scrubbing import scrub

log = logging.getLogger("varaverk.answering.capabilities")

LIMITS = {"title": 200, "what_happened": 20_000, "log_excerpt": 64_000, "log_source": 1000}


class BugReportInvalid(ValueError):
    """A draft that is not a dict of bounded strings; the message names the field."""


def versions(settings) -> dict[str, str]:
    """What a maintainer needs to reproduce: Varaverk, Python, OS, repository HEAD, models."""
    try:
        own = metadata.version("varaverk")
    except metadata.PackageNotFoundError:
        own = "unknown"
    head = gitrepo.short_head(settings.ai_repo_root) or "unknown"
    return {
        "varaverk": own,
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "repository_head": head,
        "generation": f"{settings.ai_gen_backend} {settings.ai_gen_model}",
        "embedding": f"{settings.ai_embed_backend} {settings.ai_embed_model or '(default)'}",
    }


def draft_bug_report(profile, settings, *, title: str, what_happened: str,
                     log_excerpt: str = "", log_source: str | None = None) -> dict:
    """A bug report draft for the user to review. Requires ``bug_filing``.

    Returns a dict with "title", "what_happened", "log_excerpt" (its last part when long),
    "log_source", "versions" and "created_at" (UTC, ``YYYY-MM-DDTHH:MM:SSZ``); known secret
    values and secret-looking text are scrubbed and each field is cut to ``LIMITS``. Nothing is
    written. Raises CapabilityDenied when the profile does not hold ``bug_filing``.
    """
    profile.require(BUG_FILING)
    known = known_secrets(settings)
    draft = {
        "title": scrub(title.strip(), known)[:LIMITS["title"]] or "Untitled problem",
        "what_happened": scrub(what_happened.strip(), known)[:LIMITS["what_happened"]],
        "log_excerpt": scrub(log_excerpt, known)[-LIMITS["log_excerpt"]:],
        "log_source": scrub(log_source or "", known)[:LIMITS["log_source"]],
        "versions": versions(settings),
        "created_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    log.info("bug filing: drafted %r", draft["title"])
    return draft


def validate_draft(draft) -> dict:
    """A clean copy of ``draft`` or BugReportInvalid naming the first bad field."""
    if not isinstance(draft, dict):
        raise BugReportInvalid("the draft must be an object")
    clean: dict = {}
    for key, limit in LIMITS.items():
        value = draft.get(key, "")
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise BugReportInvalid(f"{key}: must be a string")
        if len(value) > limit:
            raise BugReportInvalid(f"{key}: longer than {limit} characters")
        clean[key] = value
    if not clean["title"].strip():
        raise BugReportInvalid("title: must not be empty")
    vers = draft.get("versions") or {}
    if not isinstance(vers, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                             and len(k) < 100 and len(v) < 300
                                             for k, v in vers.items()) or len(vers) > 20:
        raise BugReportInvalid("versions: must be an object of short strings")
    clean["versions"] = dict(vers)
    created = draft.get("created_at") or ""
    clean["created_at"] = created if isinstance(created, str) and len(created) < 40 else ""
    return clean


def _markdown(report: dict) -> str:
    fence = "````" if "```" in report["log_excerpt"] else "```"
    lines = [f"# {report['title'].splitlines()[0]}", "",
             f"Filed: {report['created_at'] or 'unknown'}", "", "## What happened", "",
             report["what_happened"] or "(not described)", ""]
    if report["log_excerpt"]:
        lines += ["## Log excerpt", ""]
        if report["log_source"]:
            lines += [f"From {report['log_source']}", ""]
        lines += [f"{fence}text", report["log_excerpt"].rstrip("\n"), fence, ""]
    lines += ["## Versions", ""]
    lines += [f"- {k}: {v}" for k, v in report["versions"].items()] or ["- (none recorded)"]
    return "\n".join(lines) + "\n"


def save_bug_report(settings, draft, confirmed: bool, *, profile) -> Path | None:
    """Write ``draft`` to ``AI_DATA_DIR/bug_reports/`` when ``confirmed`` is True.

    Returns the written path, or None (and writes nothing) when not confirmed.
    """
    profile.require(BUG_FILING)
    if confirmed is not True:
        log.info("bug filing: draft not confirmed, nothing written")
        return None
    report = validate_draft(draft)
    known = known_secrets(settings)
    for key in ("title", "what_happened", "log_excerpt", "log_source"):
        report[key] = scrub(report[key], known)
    report["versions"] = {k: scrub(v, known) for k, v in report["versions"].items()}
    folder = Path(settings.ai_data_dir) / "bug_reports"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    slug = re.sub(r"[^a-z0-9]+", "-", report["title"].lower()).strip("-")[:50] or "report"
    path = folder / f"{stamp}-{slug}-{_random.token_hex(3)}.md"
    write_atomic(path, _markdown(report).encode("utf-8"), mode=0o600)
    log.info("bug filing: wrote %s", path)
    return path
