"""Conf lookup and redaction, the profile gate (chat reaches nothing), gather_context, live
health, run evidence, incidents and bug filing."""

from __future__ import annotations

import json
import logging

import pytest

from tests.capabilities.conftest import CANARIES, assert_no_canary, turn
from varaverk.answering.capabilities import (CapabilityDenied, ConfKeyNotAllowed, conf_lookup,
                                             draft_bug_report, gather_context, list_logs,
                                             live_health, read_log, recent_incidents, run_evidence,
                                             save_bug_report, scrub)
from varaverk.answering.capabilities.bug_filing import BugReportInvalid
from varaverk.answering.profiles import PROFILES, get_profile
from varaverk.host_secrets import known_secrets
from varaverk.masking.shapes import value_looks_secret

from tests.capabilities.test_scoped_log import FAILING_JOB


@pytest.fixture
def capture(caplog):
    """Every record of the varaverk loggers, even when an entry point stopped propagation."""
    root = logging.getLogger("varaverk")
    root.addHandler(caplog.handler)
    caplog.set_level(logging.DEBUG, logger="varaverk")
    yield caplog
    root.removeHandler(caplog.handler)


# ── conf lookup ──

def test_plain_whitelisted_value_is_read_at_question_time(troubleshoot, settings, repo):
    assert conf_lookup(troubleshoot, settings, "MIRROR_MAX_DELETE_PCT").value == "5"
    conf = repo / "Configurations" / "master.conf"
    conf.write_text(conf.read_text().replace('PCT="5"', 'PCT="7"'), encoding="utf-8")
    assert conf_lookup(troubleshoot, settings, "MIRROR_MAX_DELETE_PCT").value == "7"


def test_keys_off_the_whitelist_are_refused(troubleshoot, settings):
    with pytest.raises(ConfKeyNotAllowed):
        conf_lookup(troubleshoot, settings, "MASTER_SECRET_THING")
    with pytest.raises(ConfKeyNotAllowed):
        conf_lookup(troubleshoot, settings.replace(ai_conf_read_keys=()), "MIRROR_DEST")


@pytest.mark.parametrize("key,expected", [
    ("NOTIFY_API_TOKEN", "[redacted]"),         # key names a secret
    ("DB_PASSWORD", "[redacted]"),
    ("PRIVATE_KEY_PATH", "[redacted]"),
    ("WEBHOOK_ID", "[redacted]"),               # high-entropy value
    ("INNOCENT_NOTE", "[redacted]"),            # value mentions a secret
    ("GIT_REMOTE_AUTH", "[redacted]"),          # token prefix (and AUTH key)
    ("REF_OTHER", "[redacted]"),                # taken literally, never interpolated
    ("BACKUP_URL", "https://[redacted]@backup.example.lan/repo"),
    ("SMTP_RELAY", "smtp://[redacted]@mail.lan:587"),
])
def test_secret_keys_values_and_url_credentials_come_back_redacted(troubleshoot, settings, key,
                                                                   expected):
    got = conf_lookup(troubleshoot, settings, key)
    assert got.value == expected and got.redacted and got.reason
    assert_no_canary(got, got.line())


def test_unset_key_says_the_default_applies(troubleshoot, settings):
    got = conf_lookup(troubleshoot, settings.replace(ai_conf_read_keys=("MIRROR_*",)),
                      "MIRROR_MIN_FILES")
    assert got.value is None and "not set" in got.line()


def test_known_secrets_and_scrub_cover_every_canary(settings):
    known = known_secrets(settings)
    text = " ".join(CANARIES) + " password=opensesame9 Authorization: Bearer abcdefghijkl1234"
    cleaned = scrub(text, known)
    assert_no_canary(cleaned)
    assert "opensesame9" not in cleaned and "abcdefghijkl1234" not in cleaned
    # Ordinary log prose survives.
    prose = "rsync_mirror: token bucket empty, 3 failures; Authentication failed for user bob"
    assert scrub(prose, known) == prose


@pytest.mark.parametrize("value,secret", [
    ("/mnt/backup/mirror", False), ("70:85:c2:3a:11:9e", False), ("photos documents", False),
    ("3a1f9c0e2b7d4f6a8c1e3b5d7f9a0c2e", True), ("postgres://u:p4ss@db/x", True),
    ("sk-abcdefghijklmnopqrstuvwx", True), ("my secret", True),
])
def test_value_looks_secret(value, secret):
    assert (value_looks_secret(value) is not None) is secret


# ── the gate: chat reaches nothing ──

def _calls(settings):
    return {
        "scoped_log": lambda p: read_log(p, settings, "rsync_mirror.log"),
        "list_logs": lambda p: list_logs(p, settings),
        "live_health": lambda p: live_health(p, settings),
        "run_evidence": lambda p: run_evidence(p, settings, jobs=["rsync_mirror"]),
        "incidents": lambda p: recent_incidents(p, settings),
        "conf_lookup": lambda p: conf_lookup(p, settings, "MIRROR_MAX_DELETE_PCT"),
        "bug_draft": lambda p: draft_bug_report(p, settings, title="t", what_happened="w"),
        "bug_save": lambda p: save_bug_report(settings, {"title": "t"}, True, profile=p),
    }


@pytest.mark.parametrize("name", list(_calls(None)))
def test_chat_cannot_reach_any_capability(chat, settings, log_dir, name):
    (log_dir / "rsync_mirror.log").write_text(FAILING_JOB, encoding="utf-8")
    with pytest.raises(CapabilityDenied):
        _calls(settings)[name](chat)
    assert not (settings.ai_data_dir / "bug_reports").exists()


@pytest.mark.parametrize("profile", ["varaverk", "code"])
def test_other_profiles_without_the_capabilities_are_denied_too(settings, profile):
    p = get_profile(profile)
    for name, call in _calls(settings).items():
        with pytest.raises(CapabilityDenied):
            call(p)


def test_chat_gathers_nothing_even_when_asked_for_logs_and_config(chat, settings, log_dir,
                                                                   capture):
    (log_dir / "rsync_mirror.log").write_text(FAILING_JOB, encoding="utf-8")
    request = turn("Read /var/log/rsync_mirror.log and tell me NOTIFY_API_TOKEN and "
                   "MIRROR_MAX_DELETE_PCT; check disk health and file a bug",
                   log_path="rsync_mirror.log", profile="chat")
    ctx = gather_context(chat, request, settings.replace(
        ai_incidents_log=log_dir / "rsync_mirror.log", ai_run_jobs=("rsync_mirror",)))
    assert (ctx.blocks, ctx.used, ctx.queries) == ([], [], [])
    assert not ctx
    assert [r for r in capture.records if r.name.startswith("varaverk.answering.capabilities")] == []


def test_only_troubleshoot_holds_the_reading_capabilities():
    holders = {name for name, p in PROFILES.items()
               if p.capabilities & {"scoped_log", "live_health", "run_evidence", "incidents",
                                    "conf_lookup", "bug_filing"}}
    assert holders == {"troubleshoot"}


# ── gather_context for troubleshoot ──

def test_troubleshoot_context_puts_the_log_first_and_scrubs_every_secret(
        troubleshoot, settings, log_dir, capture):
    leaky = FAILING_JOB + (
        "2026-11-29 02:00:42 notify: ERROR POST https://hooks.lan/x?token=CANARY-7f3a9c-SECRET failed 401\n"
        "2026-11-29 02:00:43 db_dump: connecting with DB_PASSWORD=hunter2-canary-pw failed\n"
        "2026-11-29 02:00:44 offsite: WARN https://backupuser:Canary-Url-Pw-991@backup.example.lan refused\n")
    (log_dir / "rsync_mirror.log").write_text(leaky, encoding="utf-8")
    request = turn("Why did the mirror skip photos? What is MIRROR_MAX_DELETE_PCT and "
                   "NOTIFY_API_TOKEN and BACKUP_URL?", log_path="rsync_mirror.log")
    ctx = gather_context(troubleshoot, request, settings)
    assert ctx.blocks[0].startswith(f"[log lines 1-9 of {log_dir / 'rsync_mirror.log'}]")
    assert ctx.used[0] == {"capability": "scoped_log", "source": str(log_dir / "rsync_mirror.log"),
                           "lines": [1, 9],
                           "summary": f"log lines 1-9 of {log_dir / 'rsync_mirror.log'}"}
    assert any("delete ratio 18.9% above ceiling 5%" in q for q in ctx.queries)
    conf_block = next(b for b in ctx.blocks if b.startswith("[configuration values"))
    assert "MIRROR_MAX_DELETE_PCT=5" in conf_block
    assert "NOTIFY_API_TOKEN=[redacted]" in conf_block
    assert "BACKUP_URL=https://[redacted]@backup.example.lan/repo" in conf_block
    assert any(b.startswith("[live health of testhost") for b in ctx.blocks)
    assert [u["capability"] for u in ctx.used] == ["scoped_log", "live_health", "conf_lookup"]
    assert_no_canary(ctx.blocks, ctx.used, ctx.queries, capture.text,
                     [r.getMessage() for r in capture.records])


def test_refused_log_becomes_a_note_not_a_crash(troubleshoot, settings, tmp_path):
    (tmp_path / "outside.log").write_text("CANARY-7f3a9c-SECRET\n", encoding="utf-8")
    ctx = gather_context(troubleshoot, turn("why?", log_path="../outside.log"), settings)
    assert ctx.used[0]["capability"] == "scoped_log" and "error" in ctx.used[0]
    assert "not read" in ctx.blocks[0]
    assert_no_canary(ctx.blocks)


def test_no_log_open_means_no_log_block(troubleshoot, settings):
    ctx = gather_context(troubleshoot, turn("how is the host?"), settings)
    assert [u["capability"] for u in ctx.used] == ["live_health"]
    assert ctx.queries == []


# ── live health ──

def test_live_health_reports_load_memory_uptime_disks_and_services(troubleshoot, settings,
                                                                  tmp_path):
    report = live_health(troubleshoot, settings.replace(
        ai_health_mounts=("/", str(tmp_path), str(tmp_path / "missing")),
        ai_health_services=("surely-not-a-unit-xyz", "docker:surely-not-a-container")))
    assert len(report.load) == 3 and report.cpus >= 1
    assert report.memory["total"] > 0 and report.uptime_s > 0
    disks = {d["mount"]: d for d in report.disks}
    assert disks["/"]["total"] > 0 and disks["/"]["is_mount"] is True
    assert disks[str(tmp_path)]["is_mount"] is False
    assert "error" in disks[str(tmp_path / "missing")]
    assert [s["name"] for s in report.services] == ["surely-not-a-unit-xyz",
                                                    "docker:surely-not-a-container"]
    assert all(s["state"] != "active" for s in report.services)
    block = report.block()
    assert "load average" in block and "uptime" in block
    assert f"disk {tmp_path} " in block and "not a mount point" in block


# ── run evidence ──

def test_run_evidence_from_status_file_json_and_log(troubleshoot, settings, log_dir, tmp_path):
    status = tmp_path / "state"
    status.mkdir()
    (status / "db_dump.status").write_text(
        "# start|end|exit\n"
        "2026-11-27T01:00:00Z|2026-11-27T01:04:10Z|0\n"
        "1764378000|1764378300|0\n"
        "2026-11-29T01:00:00Z|2026-11-29T01:00:09Z|2|pg_dump: connection refused\n"
        "2026-11-29T02:00:00Z||\n", encoding="utf-8")
    (status / "offsite_push.json").write_text(json.dumps(
        {"start": "2026-11-29T03:00:00Z", "finished": "2026-11-29T03:30:00Z", "exit_code": 0,
         "summary": "pushed 3 snapshots"}), encoding="utf-8")
    (log_dir / "rsync_mirror.log").write_text(FAILING_JOB, encoding="utf-8")
    s = settings.replace(ai_run_status_dir=status,
                         ai_run_jobs=("db_dump", "offsite_push", "rsync_mirror", "nojob", "../x"))
    results = {r.job: r for r in run_evidence(troubleshoot, s)}
    db = results["db_dump"].runs
    assert [(r.start, r.end, r.exit_code) for r in db] == [
        ("2025-11-29T01:00:00Z", "2025-11-29T01:05:00Z", 0),
        ("2026-11-29T01:00:00Z", "2026-11-29T01:00:09Z", 2),
        ("2026-11-29T02:00:00Z", None, None)]
    assert db[1].outcome == "FAILED (exit 2)" and db[1].summary == "pg_dump: connection refused"
    assert db[2].outcome == "running or no end recorded"
    off = results["offsite_push"].runs
    assert [(r.end, r.exit_code, r.summary) for r in off] == [
        ("2026-11-29T03:30:00Z", 0, "pushed 3 snapshots")]
    mirror = results["rsync_mirror"]
    assert mirror.source == str(log_dir / "rsync_mirror.log")
    assert [(r.start, r.end, r.exit_code, r.line) for r in mirror.runs] == [
        ("2026-11-29 02:00:01", "2026-11-29 02:00:41", 3, 6)]
    assert results["nojob"].runs == [] and not results["nojob"].error
    assert results["../x"].error
    ctx = gather_context(troubleshoot, turn("did the jobs run?"), s)
    block = next(b for b in ctx.blocks if b.startswith("[run evidence"))
    assert "rsync_mirror: start 2026-11-29 02:00:01, end 2026-11-29 02:00:41, FAILED (exit 3)" in block
    assert f"[from {log_dir / 'rsync_mirror.log'} line 6]" in block


# ── incidents ──

def test_recent_incidents_from_text_and_json_lines(troubleshoot, settings, tmp_path):
    path = tmp_path / "incidents.log"
    path.write_text(
        "2026-11-01 harbor02 unreachable for 2 h\n"
        "  cause: switch port flapped\n"
        '{"time": "2026-11-20T04:00Z", "severity": "major", "host": "harbor01", "summary": "parity errors"}\n'
        "2026-11-28 mirror skipped photos (delete ratio)\n", encoding="utf-8")
    got = recent_incidents(troubleshoot, settings.replace(ai_incidents_log=path), limit=2)
    assert got.entries == ["2026-11-20T04:00Z | major | harbor01 | parity errors",
                           "2026-11-28 mirror skipped photos (delete ratio)"]
    everything = recent_incidents(troubleshoot, settings.replace(ai_incidents_log=path))
    assert everything.entries[0] == "2026-11-01 harbor02 unreachable for 2 h cause: switch port flapped"
    assert recent_incidents(troubleshoot, settings) is None


# ── bug filing ──

def test_bug_report_is_written_only_on_confirm(troubleshoot, settings, capture):
    draft = draft_bug_report(troubleshoot, settings, title="Mirror skips photos",
                             what_happened="The token CANARY-7f3a9c-SECRET was rejected",
                             log_excerpt="4: ERROR delete ratio 18.9%",
                             log_source="log lines 1-6 of /var/log/rsync_mirror.log")
    assert set(draft) == {"title", "what_happened", "log_excerpt", "log_source", "versions",
                          "created_at"}
    assert {"varaverk", "python", "os", "repository_head", "generation",
            "embedding"} <= set(draft["versions"])
    folder = settings.ai_data_dir / "bug_reports"
    assert save_bug_report(settings, draft, False, profile=troubleshoot) is None
    assert save_bug_report(settings, draft, "yes", profile=troubleshoot) is None
    assert not folder.exists()
    path = save_bug_report(settings, draft, True, profile=troubleshoot)
    assert path.parent == folder and path.suffix == ".md"
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# Mirror skips photos\n")
    assert "4: ERROR delete ratio 18.9%" in text and "## Versions" in text
    assert [p.name for p in folder.iterdir()] == [path.name]  # no temporary file left
    assert_no_canary(draft, text, capture.text)


def test_bug_report_from_the_browser_is_revalidated_and_scrubbed(troubleshoot, settings):
    with pytest.raises(BugReportInvalid):
        save_bug_report(settings, {"title": ["x"]}, True, profile=troubleshoot)
    with pytest.raises(BugReportInvalid):
        save_bug_report(settings, {"title": "x" * 201}, True, profile=troubleshoot)
    with pytest.raises(BugReportInvalid):
        save_bug_report(settings, "not a dict", True, profile=troubleshoot)
    path = save_bug_report(settings, {"title": "t", "what_happened": "pw hunter2-canary-pw"},
                           True, profile=troubleshoot)
    assert_no_canary(path.read_text(encoding="utf-8"))
