#!/usr/bin/env python3
# Varaverk :: Tools/varaverk_tools/ai_token_sync.py (console script: ai-token-sync)
# Pull every partner host's token ledger into a local cache so fleet totals can be shown here.
#
# PURPOSE
#   Every host of the fleet keeps its own token ledger: one pipe-delimited line per completed
#   ask (date|time|host|profile|source|prompt_tokens|completion_tokens|tok_s). An operator
#   wants to see today's, this week's and all-time token use for the whole fleet from any one
#   dock, without a central server. This job copies each partner's ledger to this host, so the
#   dock's token panel can total its own ledger plus the cached ones.
#
# OPERATIONAL MODEL
#   The partners are the slots of the hosts conf (AI_HOSTS_CONF, default
#   Configurations/hosts.conf): slot name = the partner's AI_HOST_NAME, value = its dock URL.
#   This host's own slot is skipped, so one hosts conf can be shared by the whole fleet. For
#   each partner the job sends GET <url>/api/fleet/ledger with the fleet read token, as a
#   conditional request built from the ETag and Last-Modified it saved last time. A 304 means
#   the cached copy is current and nothing is written. A 200 body is validated and written
#   atomically to AI_TOKEN_CACHE_DIR/<slot>.tokens.db, with the new validators in a small
#   sidecar file beside it. The dock's token panel (varaverk.ledger.fleet.fleet_totals) reads those
#   files. A systemd timer (Deployment/varaverk-token-sync.timer) or the cron line in
#   Deployment/varaverk.cron runs the job every four hours.
#
# DESIGN PRINCIPLES
#   Pull Only, Never Push
#     A host writes exactly one ledger: its own. This job only ever fetches partners' ledgers
#     and only ever writes its own cache folder. Nothing is sent to a partner but a GET, and
#     no host can change another host's counters.
#   One File Per Partner
#     Each partner's ledger lands in a file of its own named after its slot. Merging ledgers
#     into one file would lose lines the way last-writer-wins copies do, and would
#     make a double count invisible.
#   A File Counts Only Its Own Host
#     When the totals are computed, a partner's file contributes only rows whose host column
#     equals its slot. A ledger copied into the wrong slot, or a partner serving rows of some
#     third host, cannot inflate a total that would still look plausible.
#   Stale Counters Are Worse Than Absent Ones
#     The cache lives under /tmp by default (tmpfs) and has no save/restore pair: after a
#     reboot a partner shows as "not collected here" until the next sync, never as an old
#     number that looks current. A partner never collected is never shown as zero.
#   Conditional Requests
#     Ledgers grow slowly and the timer runs often; an unchanged ledger costs the partner one
#     stat and a 304, not a transfer.
#
# OPERATIONAL SAFEGUARDS
#   Single Instance Lock
#     The job holds a file lock (AI_TOKEN_CACHE_DIR/.ai-token-sync.lock) for its whole run. A
#     second start while one runs exits at once with code 75 instead of queueing.
#   Unreachable Partner Is Normal
#     A partner that cannot be reached (down, asleep, unplugged for weeks) leaves its cached
#     file exactly as it was and is logged at INFO. It does not fail the run.
#   Validation Before Replace
#     A 200 answer replaces the cache only if it is text/plain, under 64 MiB, and, when not
#     empty, holds at least one well-formed ledger line. An HTML error page from a proxy, a
#     login page or a truncated transfer never replaces a good copy. Malformed lines inside an
#     accepted ledger are kept and skipped at read time, each reported with its line number.
#   Deadline Per Partner
#     Each pull (connect, headers, body) must finish within AI_HTTP_TIMEOUT (at most 30 s) in
#     total, not per read: a partner trickling one byte every few seconds is cut off at the
#     deadline, its cached copy left alone, and the next partner is synced.
#   Bounded Fields
#     Token counts of more than 12 digits, names longer than 100 characters and other bad
#     lines are skipped and counted, so a hostile ledger can neither crash the run nor be
#     cached in a shape that breaks the totals later.
#   Atomic Cache Writes
#     The cache file is written to a temporary file in the same folder, fsynced and renamed
#     over the old one, so the dock never reads a half-written partner ledger.
#   Sidecar Matches The Cache
#     The saved ETag is used only while the cache file exists and the partner URL is the one
#     it was saved for; otherwise the request is unconditional, so a deleted cache is always
#     fetched again instead of being answered 304 forever.
#   Private Cache Folder
#     The cache folder is created with mode 0700 and must be owned by the user running the
#     job: in a shared /tmp another user could otherwise pre-create it and plant ledgers.
#   Secret Hygiene
#     The fleet token is sent only in the Authorization header and never logged.
#
# CONFIGURATION
#   AI_ENABLED
#     Master switch. While false the job logs one line and exits 0.
#   AI_HOSTS_CONF
#     The hosts conf: slot=URL lines (see Deployment/hosts.conf.template). Empty means
#     Configurations/hosts.conf of the repository. A missing file is a fleet of one.
#   AI_FLEET_TOKEN
#     The fleet read token, the same on every host; presented to partners and required by
#     this host's own /api/fleet/ledger endpoint. Required as soon as a partner is listed.
#   AI_TOKEN_CACHE_DIR
#     Where partner ledgers are cached (default /tmp/varaverk-tokens).
#   AI_HOST_NAME
#     This host's slot name, skipped when it appears in the hosts conf.
#   AI_HTTP_TIMEOUT
#     Upper bound in seconds for one partner request (capped at 30; connect timeout 5).
#
# RUNTIME MODES
#   Default
#     ai-token-sync: sync every partner, then exit 0 when every reachable partner answered
#     well, 1 when some partner answered with an error (bad token, invalid ledger).
#   Single Partner
#     ai-token-sync --slot NAME: sync one partner only.
#   Quiet
#     ai-token-sync --quiet: only warnings and errors on stderr, for cron, which mails
#     whatever a job prints; the log file under AI_LOG_DIR still gets every line.
#   Totals Only
#     ai-token-sync --totals-only: contact nobody, print the fleet totals from this host's
#     ledger and the cached partner ledgers (the same numbers as the dock's token panel).
#   Exit Codes
#     0 done (also disabled or nothing to sync), 1 a partner answered with an error,
#     2 bad command line, 75 another sync holds the lock, 78 invalid configuration.
"""Pull partner ledgers into AI_TOKEN_CACHE_DIR (see the header above)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path

import filelock
import httpx

from varaverk import bounded_http, exitcodes
from varaverk import cli
from varaverk.atomic_files import write_atomic
from varaverk.cli import HelpFormatter
from varaverk.config import ConfigError, Settings, add_config_option, load_settings
from varaverk.ledger.fleet import CACHE_SUFFIX, cache_path, fleet_totals, read_hosts_conf
from varaverk.ledger.rows import parse_text
from varaverk.ledger.totals import NOT_COLLECTED, PERIODS, Tally, Totals
from varaverk.logs import setup_logging

PROG = "ai-token-sync"
LEDGER_ENDPOINT = "/api/fleet/ledger"
MAX_LEDGER_BYTES = 64 * 1024 * 1024
CONNECT_TIMEOUT = 5.0
MAX_REQUEST_TIMEOUT = 30.0
SIDECAR_SUFFIX = ".meta.json"
LOCK_NAME = ".ai-token-sync.lock"

log = logging.getLogger("varaverk.ai_token_sync")

UPDATED, UNCHANGED, UNREACHABLE, FAILED = "updated", "unchanged", "unreachable", "failed"


class InvalidLedger(ValueError):
    """A partner's 200 answer that must not replace the cached copy."""


class PullTimeout(InvalidLedger):
    """The partner did not deliver its whole answer within the pull's deadline."""


@dataclass
class SyncReport:
    """What happened per slot: slot -> one of updated / unchanged / unreachable / failed."""

    outcomes: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> list[str]:
        """Slots whose partner answered with an error."""
        return [slot for slot, outcome in self.outcomes.items() if outcome == FAILED]


def ensure_cache_dir(path: Path) -> Path:
    """Create the cache folder (mode 0700) and check it belongs to us and is no symlink.

    Raises ConfigError naming AI_TOKEN_CACHE_DIR when it is owned by someone else.
    """
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"AI_TOKEN_CACHE_DIR: {path} is not a plain folder")
    if info.st_uid != os.getuid():
        raise ConfigError(f"AI_TOKEN_CACHE_DIR: {path} belongs to uid {info.st_uid}, not to us")
    return path


def _sidecar(cache_file: Path) -> Path:
    return cache_file.with_name(cache_file.name + SIDECAR_SUFFIX)


def _load_validators(cache_file: Path, url: str) -> dict[str, str]:
    """Conditional request headers from the sidecar, if it still describes the cached file."""
    if not cache_file.is_file():
        return {}
    try:
        meta = json.loads(_sidecar(cache_file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(meta, dict) or meta.get("url") != url:
        return {}
    headers = {}
    if isinstance(meta.get("etag"), str) and meta["etag"]:
        headers["If-None-Match"] = meta["etag"]
    if isinstance(meta.get("last_modified"), str) and meta["last_modified"]:
        headers["If-Modified-Since"] = meta["last_modified"]
    return headers


def validate_ledger(data: bytes, content_type: str, slot: str) -> list[str]:
    """Check a partner's answer before it may replace the cache; returns line problems.

    Raises InvalidLedger when the body is not a plain-text ledger at all (wrong content type,
    too large, or not empty yet without a single well-formed line).
    """
    if not content_type.split(";")[0].strip().lower() == "text/plain":
        raise InvalidLedger(f"content type {content_type or 'none'!r}, expected text/plain")
    if len(data) > MAX_LEDGER_BYTES:
        raise InvalidLedger(f"{len(data)} bytes, more than {MAX_LEDGER_BYTES}")
    rows, problems = parse_text(data, f"{slot}{CACHE_SUFFIX}")
    if data.strip() and not rows:
        raise InvalidLedger("no well-formed ledger line in the answer")
    return problems


def _fetch(client: httpx.Client, url: str, headers: dict[str, str], deadline: float
           ) -> tuple[int, httpx.Headers, bytes]:
    """GET ``url``; returns status, headers and body, capped at 64 MiB once decoded.

    The whole pull (connect, headers, body) must end within ``deadline`` seconds, not each
    read: a partner sending one byte a second would otherwise hold the run (and its lock) for
    as long as it likes (``varaverk.bounded_http``). Raises PullTimeout past the deadline,
    InvalidLedger for a body too large or in an encoding we did not ask for, and
    httpx.HTTPError when the partner cannot be reached.
    """
    try:
        answer = bounded_http.fetch(client, "GET", url, deadline=deadline,
                                    max_bytes=MAX_LEDGER_BYTES, headers=headers)
    except bounded_http.DeadlineExceeded:
        raise PullTimeout(f"no complete answer within {deadline:g} s (AI_HTTP_TIMEOUT)") \
            from None
    except bounded_http.BoundedReadError as exc:
        raise InvalidLedger(str(exc)) from None
    return answer.status_code, answer.headers, answer.content


def pull_deadline(settings: Settings) -> float:
    """Seconds one partner's whole pull may take: AI_HTTP_TIMEOUT, at most 30."""
    return min(settings.ai_http_timeout, MAX_REQUEST_TIMEOUT)


def sync_partner(client: httpx.Client, slot: str, base_url: str, settings: Settings,
                 cache_dir: Path) -> tuple[str, str]:
    """Bring one partner's cached ledger up to date.

    Returns ``(outcome, message)`` with outcome updated / unchanged / unreachable / failed.
    Only ``cache_dir/<slot>.tokens.db`` and its sidecar are ever written.
    """
    url = base_url.rstrip("/") + LEDGER_ENDPOINT
    cache_file = cache_path(cache_dir, slot)
    headers = {"Authorization": f"Bearer {settings.ai_fleet_token}", **_load_validators(
        cache_file, url)}
    try:
        status, response_headers, data = _fetch(client, url, headers, pull_deadline(settings))
    except httpx.TransportError as exc:
        return UNREACHABLE, f"{url} unreachable ({type(exc).__name__}); cached copy left alone"
    except InvalidLedger as exc:
        return FAILED, f"{url}: {exc}; cached copy left alone"
    if status == 304:
        return UNCHANGED, f"{url}: not modified"
    if status != 200:
        hint = {401: " (AI_FLEET_TOKEN differs from the partner's)",
                404: " (fleet sharing off on the partner: AI_FLEET_TOKEN unset there)"}
        return FAILED, (f"{url}: HTTP {status}{hint.get(status, '')}; cached copy left alone")
    try:
        problems = validate_ledger(data, response_headers.get("Content-Type", ""), slot)
    except InvalidLedger as exc:
        return FAILED, f"{url}: {exc}; cached copy left alone"
    write_atomic(cache_file, data)
    meta = {"url": url, "etag": response_headers.get("ETag", ""),
            "last_modified": response_headers.get("Last-Modified", "")}
    write_atomic(_sidecar(cache_file), json.dumps(meta).encode("utf-8"))
    note = f"; {len(problems)} malformed line(s) will be skipped" if problems else ""
    return UPDATED, f"{url}: {len(data)} bytes cached in {cache_file}{note}"


def sync_all(settings: Settings, slots: list[str] | None = None,
             client: httpx.Client | None = None) -> SyncReport:
    """Sync every partner of the hosts conf (or just ``slots``); see ``sync_partner``.

    Raises ConfigError for an invalid hosts conf, an unknown slot, a missing fleet token or a
    cache folder that is not ours.
    """
    try:
        hosts = read_hosts_conf(settings.hosts_conf_path)
    except ValueError as exc:
        raise ConfigError(f"AI_HOSTS_CONF: {exc}") from None
    partners = {slot: url for slot, url in hosts.items() if slot != settings.ai_host_name}
    if slots:
        unknown = [slot for slot in slots if slot not in partners]
        if unknown:
            raise ConfigError(f"AI_HOSTS_CONF: no partner slot {', '.join(unknown)} in "
                              f"{settings.hosts_conf_path}")
        partners = {slot: partners[slot] for slot in slots}
    report = SyncReport()
    if not partners:
        return report
    if not settings.ai_fleet_token:
        raise ConfigError("AI_FLEET_TOKEN: required to pull partner ledgers "
                          f"({len(partners)} partner(s) in {settings.hosts_conf_path})")
    cache_dir = ensure_cache_dir(settings.ai_token_cache_dir)
    own_client = client is None
    if own_client:
        deadline = pull_deadline(settings)
        timeout = httpx.Timeout(deadline, connect=min(CONNECT_TIMEOUT, deadline))
        client = httpx.Client(timeout=timeout, follow_redirects=False)
    try:
        for slot, url in partners.items():
            outcome, message = sync_partner(client, slot, url, settings, cache_dir)
            report.outcomes[slot] = outcome
            report.messages[slot] = message
            level = logging.WARNING if outcome == FAILED else logging.INFO
            log.log(level, "%s: %s: %s", slot, outcome, message)
    finally:
        if own_client:
            client.close()
    return report


def format_totals(result: Totals) -> str:
    """A plain-text table of fleet totals (tokens known; unknown row counts in brackets)."""
    def cell(tally: Tally) -> str:
        unknown = tally.unknown_prompt + tally.unknown_completion
        return f"{tally.total_tokens}" + (f" [{unknown} unknown]" if unknown else "")

    lines = [f"{'host':<20} {'today':>20} {'last 7 days':>20} {'all time':>20}"]
    for host, periods in result.hosts.items():
        lines.append(f"{host:<20} " + " ".join(f"{cell(periods[p]):>20}" for p in PERIODS))
    for slot in result.not_collected:
        lines.append(f"{slot:<20} {NOT_COLLECTED}")
    lines.append(f"{'fleet':<20} " + " ".join(f"{cell(result.fleet[p]):>20}"
                                              for p in PERIODS))
    lines.extend(f"skipped: {problem}" for problem in result.problems)
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The command line (see RUNTIME MODES in the header)."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="Pull partner hosts' token ledgers into AI_TOKEN_CACHE_DIR "
        "(pull only; this host's own ledger is never written).",
        formatter_class=HelpFormatter,
        epilog=exitcodes.epilog(exitcodes.OK, exitcodes.FAILURE, exitcodes.USAGE,
                                exitcodes.LOCKED, exitcodes.CONFIG, exitcodes.INTERRUPTED))
    add_config_option(parser)
    parser.add_argument("--slot", action="append", metavar="NAME",
                        help="sync only this partner slot (repeatable)")
    parser.add_argument("--totals-only", action="store_true",
                        help="contact nobody; print fleet totals from the ledgers on this host")
    noise = parser.add_mutually_exclusive_group()
    noise.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    noise.add_argument("-q", "--quiet", action="store_true",
                       help="only warnings and errors on stderr (cron mails only those)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns an exit code from varaverk.exitcodes."""
    return cli.run(PROG, _main, argv)


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    settings = load_settings(args.config)
    setup_logging(settings, PROG, verbose=args.verbose, quiet=args.quiet,
                  to_file=not args.totals_only)
    if args.totals_only:
        try:
            print(format_totals(fleet_totals(settings)))
        except ValueError as exc:
            log.error("AI_HOSTS_CONF: %s", exc)
            return exitcodes.CONFIG
        return exitcodes.OK
    if not settings.ai_enabled:
        log.info("AI_ENABLED=false: nothing to do")
        return exitcodes.OK
    try:
        cache_dir = ensure_cache_dir(settings.ai_token_cache_dir)
        lock = filelock.FileLock(str(cache_dir / LOCK_NAME), timeout=0)
        with lock:
            report = sync_all(settings, slots=args.slot)
    except filelock.Timeout:
        log.warning("another %s run holds %s; exiting", PROG, cache_dir / LOCK_NAME)
        return exitcodes.LOCKED
    if not report.outcomes:
        log.info("no partner in %s: nothing to sync", settings.hosts_conf_path)
    counts = {o: list(report.outcomes.values()).count(o)
              for o in (UPDATED, UNCHANGED, UNREACHABLE, FAILED)}
    log.info("done: %s", ", ".join(f"{n} {o}" for o, n in counts.items()))
    return exitcodes.FAILURE if report.failed else exitcodes.OK


if __name__ == "__main__":
    sys.exit(main())
