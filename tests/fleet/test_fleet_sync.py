"""Three docks on loopback ports as a fleet: pull-only sync, 304s, partners down, fleet totals."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.support.environ import write_master_conf
from varaverk.ledger.fleet import cache_path, fleet_totals
from varaverk.ledger.rows import LedgerRow
from varaverk.ledger.storage import append_row, read_rows
from varaverk_tools import ai_token_sync as sync

NOW = dt.datetime(2025, 1, 10, 12, 0, tzinfo=dt.timezone.utc)


def _add(dock, count: int, *, date="2025-01-10", prompt=100, completion=10, host=None):
    rows = [LedgerRow(date, f"10:{i % 60:02d}:00", host or dock.name, "varaverk", "webgui",
                      prompt + i, completion, 20.0) for i in range(count)]
    for row in rows:
        append_row(dock.ledger, row)
    return rows


def _own_sum(docks) -> tuple[int, int, int]:
    """rows, prompt, completion: each host's own ledger read on its own host."""
    rows = prompt = completion = 0
    for dock in docks:
        own, _ = read_rows(dock.ledger, host=dock.name)
        rows += len(own)
        prompt += sum(r.prompt_tokens or 0 for r in own)
        completion += sum(r.completion_tokens or 0 for r in own)
    return rows, prompt, completion


def _fleet_sum(settings) -> tuple[int, int, int]:
    tally = fleet_totals(settings, now=NOW).fleet["all_time"]
    return tally.rows, tally.prompt_tokens, tally.completion_tokens


def test_fleet_totals_equal_the_sum_of_each_hosts_rows_before_and_after_a_partner_goes_down(
        fleet):
    a, b, c = fleet["hostA"], fleet["hostB"], fleet["hostC"]
    _add(a, 3)
    _add(b, 5, prompt=1000)
    _add(c, 7, prompt=50, date="2025-01-02")
    report = sync.sync_all(a.settings)
    assert report.outcomes == {"hostB": "updated", "hostC": "updated", "hostD": "unreachable"}
    assert _fleet_sum(a.settings) == _own_sum([a, b, c]) == (15, 303 + 5010 + 371, 150)

    totals = fleet_totals(a.settings, now=NOW)
    assert set(totals.hosts) == {"hostA", "hostB", "hostC"}
    assert totals.not_collected == ["hostD"]
    assert totals.as_dict()["hosts"]["hostD"] == {"status": "not collected here"}
    assert totals.fleet["today"].rows == 8 and totals.fleet["last_7_days"].rows == 8
    assert totals.problems == []

    b.stop()
    _add(c, 2, prompt=1)
    report = sync.sync_all(a.settings)
    assert report.outcomes["hostB"] == "unreachable" and report.outcomes["hostC"] == "updated"
    assert cache_path(a.settings.ai_token_cache_dir, "hostB").is_file()  # left alone
    assert _fleet_sum(a.settings) == _own_sum([a, b, c]) == (17, 303 + 5010 + 371 + 3, 170)


def test_every_host_sees_the_same_fleet_total(fleet):
    for dock, count in zip(fleet.values(), (2, 4, 6)):
        _add(dock, count)
    for dock in fleet.values():
        sync.sync_all(dock.settings)
    totals = {_fleet_sum(dock.settings) for dock in fleet.values()}
    assert totals == {_own_sum(fleet.values())}


def test_unchanged_ledger_is_answered_304_and_the_cache_is_left_alone(fleet):
    a, b = fleet["hostA"], fleet["hostB"]
    _add(b, 2)
    assert sync.sync_all(a.settings, slots=["hostB"]).outcomes == {"hostB": "updated"}
    cached = cache_path(a.settings.ai_token_cache_dir, "hostB")
    before = cached.stat()
    assert sync.sync_all(a.settings, slots=["hostB"]).outcomes == {"hostB": "unchanged"}
    assert b.statuses == [200, 304]
    after = cached.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)

    _add(b, 1)
    assert sync.sync_all(a.settings, slots=["hostB"]).outcomes == {"hostB": "updated"}
    assert b.statuses == [200, 304, 200]
    assert len(read_rows(cached, host="hostB")[0]) == 3


def test_a_deleted_cache_is_fetched_again_not_answered_304(fleet):
    a, b = fleet["hostA"], fleet["hostB"]
    _add(b, 2)
    sync.sync_all(a.settings, slots=["hostB"])
    cache_path(a.settings.ai_token_cache_dir, "hostB").unlink()
    assert sync.sync_all(a.settings, slots=["hostB"]).outcomes == {"hostB": "updated"}
    assert b.statuses == [200, 200]


def test_rows_of_a_foreign_host_in_a_partner_ledger_do_not_count(fleet):
    a, c = fleet["hostA"], fleet["hostC"]
    _add(a, 4)
    _add(c, 3, prompt=7)
    # hostC's file also holds hostA's rows (a ledger copied over) and a third host's rows.
    _add(c, 4, host="hostA")
    _add(c, 2, host="elsewhere")
    sync.sync_all(a.settings)
    totals = fleet_totals(a.settings, now=NOW)
    assert totals.hosts["hostC"]["all_time"].rows == 3
    assert totals.hosts["hostA"]["all_time"].rows == 4
    assert totals.fleet["all_time"].rows == 7
    cache = cache_path(a.settings.ai_token_cache_dir, "hostC")
    assert totals.problems == [
        f"{cache}:8: 2 row(s) of host 'elsewhere' in the ledger of 'hostC', not counted",
        f"{cache}:4: 4 row(s) of host 'hostA' in the ledger of 'hostC', not counted",
    ]


def test_malformed_lines_in_a_partner_ledger_are_skipped_and_reported(fleet):
    a, b = fleet["hostA"], fleet["hostB"]
    _add(b, 2)
    with open(b.ledger, "ab") as handle:
        handle.write(b"2025-01-10|10:00:00|hostB|varaverk|webgui|12|x|1.0\n")
    _add(b, 1, prompt=5)
    with open(b.ledger, "ab") as handle:
        handle.write(b"2025-01-10|10:00:00|hostB|varav")  # cut off mid-line
    assert sync.sync_all(a.settings, slots=["hostB"]).outcomes == {"hostB": "updated"}
    totals = fleet_totals(a.settings, now=NOW)
    cache = cache_path(a.settings.ai_token_cache_dir, "hostB")
    assert totals.hosts["hostB"]["all_time"].rows == 3
    assert [p.split(": ")[0] for p in totals.problems] == [f"{cache}:3", f"{cache}:5"]


def test_own_ledger_problems_are_reported_too(fleet):
    a = fleet["hostA"]
    _add(a, 1)
    with open(a.ledger, "ab") as handle:
        handle.write(b"not a ledger line\n")
    totals = fleet_totals(a.settings, now=NOW)
    assert totals.hosts["hostA"]["all_time"].rows == 1
    assert totals.problems == [f"{a.ledger}:2: expected 8 fields separated by '|', found 1, "
                               "skipped"]


def test_a_partner_never_collected_is_not_collected_here_never_zero(fleet):
    a = fleet["hostA"]
    _add(a, 1)
    totals = fleet_totals(a.settings, now=NOW)  # no sync has run yet
    assert totals.not_collected == ["hostB", "hostC", "hostD"]
    assert set(totals.hosts) == {"hostA"}
    text = sync.format_totals(totals)
    assert "hostB                not collected here" in text


def test_wrong_token_fails_and_leaves_the_cache_alone(fleet):
    a, b = fleet["hostA"], fleet["hostB"]
    _add(b, 2)
    sync.sync_all(a.settings, slots=["hostB"])
    cached = cache_path(a.settings.ai_token_cache_dir, "hostB")
    before = cached.read_bytes()
    report = sync.sync_all(a.settings.replace(ai_fleet_token="wrong"), slots=["hostB"])
    assert report.outcomes == {"hostB": "failed"} and "HTTP 401" in report.messages["hostB"]
    assert cached.read_bytes() == before


def test_sync_never_writes_outside_its_cache_and_never_touches_partner_ledgers(fleet):
    a, b = fleet["hostA"], fleet["hostB"]
    _add(b, 2)
    b_before = b.ledger.read_bytes()
    sync.sync_all(a.settings)
    assert b.ledger.read_bytes() == b_before
    assert not a.ledger.exists()  # hostA asked nothing: its own ledger is not created
    names = sorted(p.name for p in a.settings.ai_token_cache_dir.iterdir())
    assert names == ["hostB.tokens.db", "hostB.tokens.db.meta.json",
                     "hostC.tokens.db", "hostC.tokens.db.meta.json"]
    assert oct(a.settings.ai_token_cache_dir.stat().st_mode & 0o777) == "0o700"


def test_no_partner_needs_no_token(tmp_path, fleet):
    settings = fleet["hostA"].settings.replace(ai_hosts_conf=tmp_path / "none.conf",
                                               ai_fleet_token="")
    assert sync.sync_all(settings).outcomes == {}


def test_partners_without_a_fleet_token_is_a_config_error(fleet):
    from varaverk.config import ConfigError
    with pytest.raises(ConfigError, match="AI_FLEET_TOKEN"):
        sync.sync_all(fleet["hostA"].settings.replace(ai_fleet_token=""))


@pytest.mark.parametrize("body, content_type, reason", [
    (b"<html>login</html>", "text/html", "content type"),
    (b"<html>login</html>\n", "text/plain", "no well-formed"),
])
def test_an_answer_that_is_not_a_ledger_is_rejected(body, content_type, reason):
    with pytest.raises(sync.InvalidLedger, match=reason):
        sync.validate_ledger(body, content_type, "hostB")
    assert sync.validate_ledger(b"", "text/plain; charset=utf-8", "hostB") == []


# ── the entry point ─────────────────────────────────────────────────────────────────────────

def _conf(tmp_path, settings, **extra) -> str:
    values = {"AI_ENABLED": "true", "AI_DATA_DIR": settings.ai_data_dir,
              "AI_LOG_DIR": settings.ai_log_dir, "AI_HOST_NAME": settings.ai_host_name,
              "AI_FLEET_TOKEN": settings.ai_fleet_token, "AI_HOSTS_CONF": settings.ai_hosts_conf,
              "AI_TOKEN_CACHE_DIR": settings.ai_token_cache_dir, "AI_HTTP_TIMEOUT": "10"}
    values.update(extra)
    return str(write_master_conf(tmp_path / "master.conf", values))


def test_main_syncs_and_exits_0_with_a_partner_down(fleet, tmp_path, clean_env, capsys):
    a, b = fleet["hostA"], fleet["hostB"]
    _add(b, 2)
    conf = _conf(tmp_path, a.settings)
    assert sync.main(["--config", conf]) == 0
    assert cache_path(a.settings.ai_token_cache_dir, "hostB").is_file()
    assert sync.main(["--config", conf, "--totals-only"]) == 0
    out = capsys.readouterr().out
    assert "hostD                not collected here" in out and "hostB" in out


def test_main_disabled_does_nothing(fleet, tmp_path, clean_env):
    a = fleet["hostA"]
    assert sync.main(["--config", _conf(tmp_path, a.settings, AI_ENABLED="false")]) == 0
    assert not a.settings.ai_token_cache_dir.exists()
    assert fleet["hostB"].statuses == []


def test_main_exit_codes(fleet, tmp_path, clean_env):
    import filelock
    a = fleet["hostA"]
    assert sync.main(["--config", _conf(tmp_path, a.settings, AI_FLEET_TOKEN="bad")]) == 1
    assert sync.main(["--config", _conf(tmp_path, a.settings, AI_FLEET_TOKEN="")]) == 78
    assert sync.main(["--config", str(tmp_path / "missing.conf")]) == 78
    conf = _conf(tmp_path, a.settings)
    with filelock.FileLock(str(a.settings.ai_token_cache_dir / sync.LOCK_NAME)):
        assert sync.main(["--config", conf]) == 75
    with pytest.raises(SystemExit) as exc:
        sync.main(["--bogus"])
    assert exc.value.code == 2


def test_unreachable_partner_is_logged_at_info(fleet, caplog, monkeypatch):
    import logging
    # setup_logging (run by main in earlier tests) stops propagation to the root logger.
    monkeypatch.setattr(logging.getLogger("varaverk"), "propagate", True)
    caplog.set_level(logging.INFO, logger="varaverk.ai_token_sync")
    sync.sync_all(fleet["hostA"].settings, slots=["hostD"])
    records = [r for r in caplog.records if "hostD" in r.getMessage()]
    assert records and all(r.levelno == logging.INFO and "unreachable" in r.getMessage()
                           for r in records)
