"""The token ledger: format (B27), concurrent appends (B30), pruning, reading, totals."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from varaverk.ledger.rows import LedgerError, LedgerRow, format_row, parse_line, row_from_completion
from varaverk.ledger.storage import append_row, default_prune_threshold, read_rows
from varaverk.ledger.totals import totals

UTC = dt.timezone.utc


def _row(**changes) -> LedgerRow:
    base = dict(date="2025-01-02", time="10:15:00", host="hostA", profile="varaverk",
                source="webgui", prompt_tokens=812, completion_tokens=45, tok_s=22.5)
    base.update(changes)
    return LedgerRow(**base)


# ── B27 ─────────────────────────────────────────────────────────────────────────────────────

def test_b27_missing_prompt_count_is_an_empty_field_not_zero():
    completion = SimpleNamespace(prompt_tokens=None, completion_tokens=12, tok_s=12 / 0.6)
    row = row_from_completion(completion, "hostA", "varaverk", "cli",
                              now=dt.datetime(2025, 1, 2, 10, 15, tzinfo=UTC))
    assert format_row(row) == "2025-01-02|10:15:00|hostA|varaverk|cli||12|20.0"
    assert parse_line("2025-01-02|10:15:00|hostA|varaverk|cli||12|20.0\n") == row


def test_b27_no_speed_is_empty():
    completion = SimpleNamespace(prompt_tokens=None, completion_tokens=None, tok_s=None,
                                 created_at=None)
    now = dt.datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
    row = row_from_completion(completion, "hostA", "chat", "webgui", now=now)
    assert format_row(row) == "2025-03-04|05:06:07|hostA|chat|webgui|||"


def test_a_local_time_in_another_zone_is_written_in_utc():
    plus2 = dt.timezone(dt.timedelta(hours=2))
    completion = SimpleNamespace(prompt_tokens=3, completion_tokens=4, tok_s=float("nan"))
    row = row_from_completion(completion, "hostA", "chat", "cli",
                              now=dt.datetime(2025, 1, 2, 1, 0, 0, tzinfo=plus2))
    assert format_row(row) == "2025-01-01|23:00:00|hostA|chat|cli|3|4|"


def test_the_model_servers_clock_never_dates_a_row():
    # A server whose clock is a day off would move the row to another day.
    completion = SimpleNamespace(prompt_tokens=3, completion_tokens=4, tok_s=2.0,
                                 created_at=dt.datetime(2025, 1, 1, 23, 59, tzinfo=UTC))
    now = dt.datetime(2025, 1, 3, 8, 0, 0, tzinfo=UTC)
    row = row_from_completion(completion, "hostA", "chat", "cli", now=now)
    assert (row.date, row.time) == ("2025-01-03", "08:00:00")


def test_zero_reported_by_the_server_stays_zero():
    assert format_row(_row(prompt_tokens=0, tok_s=0.0)) == \
        "2025-01-02|10:15:00|hostA|varaverk|webgui|0|45|0.0"


# ── names ───────────────────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize("field, value", [
    ("profile", "var|averk"), ("profile", "chat\n2025-01-02"), ("source", "cli\r"),
    ("host", ""), ("source", "web gui "), ("host", "a\x00b"),
])
def test_separator_or_newline_in_a_name_is_rejected(field, value, tmp_path):
    path = tmp_path / "tokens.db"
    with pytest.raises(LedgerError, match=field):
        append_row(path, _row(**{field: value}))
    assert not path.exists() or path.read_bytes() == b""
    completion = SimpleNamespace(prompt_tokens=1, completion_tokens=1, tok_s=1.0, created_at=None)
    names = {"host": "hostA", "profile": "chat", "source": "cli", field: value}
    with pytest.raises(ValueError):
        row_from_completion(completion, **names)


# ── parsing ─────────────────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize("line, reason", [
    ("2025-01-02|10:15:00|hostA|varaverk|webgui|812|45", "8 fields"),
    ("2025-01-02|10:15:00|hostA|varaverk|webgui|812|45|22.5|x", "8 fields"),
    ("2025-13-02|10:15:00|hostA|varaverk|webgui|812|45|22.5", "date"),
    ("02.01.2025|10:15:00|hostA|varaverk|webgui|812|45|22.5", "date"),
    ("2025-01-02|10:15|hostA|varaverk|webgui|812|45|22.5", "time"),
    ("2025-01-02|25:15:00|hostA|varaverk|webgui|812|45|22.5", "time"),
    ("2025-01-02|10:15:00||varaverk|webgui|812|45|22.5", "host"),
    ("2025-01-02|10:15:00|hostA|varaverk|webgui|-3|45|22.5", "prompt_tokens"),
    ("2025-01-02|10:15:00|hostA|varaverk|webgui|812|4.5|22.5", "completion_tokens"),
    ("2025-01-02|10:15:00|hostA|varaverk|webgui|812|45|nan", "tok_s"),
    ("2025-01-02|10:15:00|hostA|varaverk|webgui|812|45|fast", "tok_s"),
    ("2025-02-30|10:15:00|hostA|varaverk|webgui|812|45|22.5", "date"),
    ("2025-01-02|10:15:60|hostA|varaverk|webgui|812|45|22.5", "time"),
    ("2025-01-02|10:15:00| hostA|varaverk|webgui|812|45|22.5", "host"),
    ("2025-01-02|10:15:00|hostA|varaverk|webgui |812|45|22.5", "source"),
    ("2025-01-02|10:15:00|hostA|var\taverk|webgui|812|45|22.5", "profile"),
])
def test_parse_line_rejects_malformed(line, reason):
    with pytest.raises(LedgerError, match=reason):
        parse_line(line)


def test_malformed_and_truncated_lines_are_skipped_and_reported_with_line_numbers(tmp_path):
    path = tmp_path / "tokens.db"
    path.write_bytes(
        b"2025-01-02|10:15:00|hostA|varaverk|webgui|812|45|22.5\n"       # 1 ok
        b"2025-01-02|10:15:00|hostA|varaverk|webgui|812|45|22.52025-01-02|10:15:00|hostB\n"  # 2
        b"\n"                                                              # 3 empty
        b"2025-01-02|10:16:00|hostA|chat|cli|300|20|18.0\n"               # 4 ok
        b"2025-01-02|10:17:00|hostA|chat|cli|\xff|20|18.0\n"              # 5 not UTF-8
        b"2025-01-02|10:18:00|hostA|chat|cli|3|2|1.0\n"                   # 6 ok
        b"2025-01-02|10:19:00|hostA|cha")                                 # 7 truncated
    rows, problems = read_rows(path)
    assert [r.time for r in rows] == ["10:15:00", "10:16:00", "10:18:00"]
    assert [p.split(": ")[0] for p in problems] == [f"{path}:{n}" for n in (2, 3, 5, 7)]
    assert "8 fields" in problems[0] and "truncated" in problems[3]


def test_read_rows_with_host_counts_only_that_host(tmp_path):
    path = tmp_path / "hostB.tokens.db"
    path.write_text("2025-01-02|10:15:00|hostB|chat|cli|1|2|3.0\n"
                    "2025-01-02|10:15:00|hostA|chat|cli|10|20|3.0\n"
                    "2025-01-02|10:16:00|hostA|chat|cli|10|20|3.0\n"
                    "2025-01-02|10:17:00|hostB|chat|cli|4|5|3.0\n")
    rows, problems = read_rows(path, host="hostB")
    assert [(r.prompt_tokens, r.completion_tokens) for r in rows] == [(1, 2), (4, 5)]
    assert problems == [f"{path}:2: 2 row(s) of host 'hostA' in the ledger of 'hostB', "
                        "not counted"]


def test_missing_ledger_reads_as_empty(tmp_path):
    assert read_rows(tmp_path / "none.db") == ([], [])


# ── appending ───────────────────────────────────────────────────────────────────────────────

def test_append_after_a_cut_off_line_keeps_the_new_row_whole(tmp_path):
    path = tmp_path / "tokens.db"
    path.write_bytes(b"2025-01-02|10:15:00|hostA|varaverk|webgui|812|4")
    append_row(path, _row(time="11:00:00"))
    rows, problems = read_rows(path)
    assert [r.time for r in rows] == ["11:00:00"]
    assert problems == [f"{path}:1: expected 8 fields separated by '|', found 7, skipped"]


_WRITER = textwrap.dedent("""
    import sys
    from varaverk.ledger.rows import LedgerRow
    from varaverk.ledger.storage import append_row
    path, host, count, retain, threshold = sys.argv[1], sys.argv[2], int(sys.argv[3]), \\
        int(sys.argv[4]), int(sys.argv[5])
    for seq in range(count):
        append_row(path, LedgerRow("2025-01-02", "10:15:00", host, "varaverk", "webgui",
                                   seq, 45, 22.5),
                   retain_rows=retain or None, prune_threshold_bytes=threshold)
""")


def _run_writers(path, retain: int, threshold: int, count: int = 500) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(path), host, str(count),
                               str(retain), str(threshold)])
             for host in ("hostA", "hostB")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]


def test_b30_two_processes_append_500_each_exactly_1000_whole_lines(tmp_path):
    path = tmp_path / "ledger.txt"
    _run_writers(path, retain=0, threshold=0)
    data = path.read_bytes()
    lines = data.split(b"\n")
    assert lines[-1] == b"" and len(lines) - 1 == 1000
    assert all(line.count(b"|") == 7 for line in lines[:-1])
    rows, problems = read_rows(path)
    assert problems == [] and len(rows) == 1000
    for host in ("hostA", "hostB"):
        assert sorted(r.prompt_tokens for r in rows if r.host == host) == list(range(500))


def test_pruning_keeps_the_newest_rows_and_loses_no_concurrent_append(tmp_path):
    path = tmp_path / "ledger.txt"
    # threshold 0: every append prunes, so appenders constantly race the rename.
    _run_writers(path, retain=150, threshold=0, count=300)
    rows, problems = read_rows(path)
    assert problems == [] and len(rows) == 150
    for host in ("hostA", "hostB"):
        seqs = [r.prompt_tokens for r in rows if r.host == host]
        # The survivors of each writer are its newest rows with no gap: a row appended into
        # the replaced file would leave a hole here.
        assert seqs == list(range(300 - len(seqs), 300))


def test_no_prune_below_the_threshold_and_prune_past_it(tmp_path):
    path = tmp_path / "tokens.db"
    for i in range(20):
        append_row(path, _row(prompt_tokens=i), retain_rows=5,
                   prune_threshold_bytes=10_000)
    assert len(read_rows(path)[0]) == 20  # ~1.1 kB: below the threshold, kept
    assert default_prune_threshold(20000) == 2_560_000
    inode = path.stat().st_ino
    append_row(path, _row(prompt_tokens=20), retain_rows=5, prune_threshold_bytes=100)
    rows, _ = read_rows(path)
    assert [r.prompt_tokens for r in rows] == [16, 17, 18, 19, 20]
    assert path.stat().st_ino != inode  # replaced atomically, not truncated in place
    assert not [p for p in tmp_path.iterdir() if p.name != "tokens.db"]  # no temp file left


def test_ordinary_append_never_rewrites_the_file(tmp_path):
    path = tmp_path / "tokens.db"
    append_row(path, _row())
    inode = path.stat().st_ino
    for _ in range(10):
        append_row(path, _row())
    assert path.stat().st_ino == inode and len(read_rows(path)[0]) == 11


# ── totals ──────────────────────────────────────────────────────────────────────────────────

def test_totals_periods_and_unknown_counts_are_not_zero():
    now = dt.datetime(2025, 1, 10, 12, 0, tzinfo=UTC)
    rows = {
        "hostA": [_row(date="2025-01-10", prompt_tokens=100, completion_tokens=10),
                  _row(date="2025-01-10", prompt_tokens=None, completion_tokens=5),
                  _row(date="2025-01-04", prompt_tokens=7, completion_tokens=None),
                  _row(date="2025-01-03", prompt_tokens=1000, completion_tokens=1000)],
        "hostB": [_row(host="hostB", date="2025-01-09", prompt_tokens=50,
                       completion_tokens=None)],
    }
    result = totals(rows, now)
    a = result.hosts["hostA"]
    assert a["today"].as_dict() == {"rows": 2, "prompt_tokens": 100, "completion_tokens": 15,
                                    "total_tokens": 115, "unknown_prompt": 1,
                                    "unknown_completion": 0}
    assert (a["last_7_days"].rows, a["last_7_days"].prompt_tokens,
            a["last_7_days"].unknown_completion) == (3, 107, 1)
    assert a["all_time"].total_tokens == 2122
    fleet = result.fleet
    assert (fleet["today"].rows, fleet["last_7_days"].rows, fleet["all_time"].rows) == (2, 4, 5)
    assert fleet["all_time"].prompt_tokens == 1157
    assert fleet["all_time"].unknown_prompt == 1 and fleet["all_time"].unknown_completion == 2


def test_all_unknown_counts_report_unknowns_not_a_zero_total():
    result = totals({"hostA": [_row(prompt_tokens=None, completion_tokens=None)]},
                    dt.date(2025, 1, 2))
    tally = result.hosts["hostA"]["today"]
    assert (tally.rows, tally.unknown_prompt, tally.unknown_completion) == (1, 1, 1)
