"""Scoped log: real log files (rotated, huge, binary noise, non-UTF-8), scoping and numbering."""

from __future__ import annotations

import gzip
import os

import pytest

from varaverk.answering.capabilities import (LogAccessDenied, LogNotFound, issue_queries, list_logs,
                                             read_log)
from varaverk.answering.capabilities.scoped_log import MAX_BYTES, decode_line, resolve_log

FAILING_JOB = (
    "2026-11-29 02:00:01 rsync_mirror: starting run 4711 (mode mirror)\n"
    "2026-11-29 02:00:02 rsync_mirror: share photos: source mounted, 48211 files\n"
    "2026-11-29 02:00:40 rsync_mirror: share photos: dry run reports 9120 deletions of 48211\n"
    "2026-11-29 02:00:40 rsync_mirror: ERROR share photos: delete ratio 18.9% above ceiling 5%, skipped\n"
    "2026-11-29 02:00:41 rsync_mirror: WARNING mover hold released early\n"
    "2026-11-29 02:00:41 rsync_mirror: finished, exit 3\n"
)


def test_reads_the_whole_small_log_with_its_own_line_numbers(troubleshoot, settings, log_dir):
    (log_dir / "rsync_mirror.log").write_text(FAILING_JOB, encoding="utf-8")
    [ex] = read_log(troubleshoot, settings, "rsync_mirror.log")
    assert (ex.first_line, ex.last_line, ex.total_lines, ex.truncated) == (1, 6, 6, False)
    assert ex.label == f"log lines 1-6 of {log_dir / 'rsync_mirror.log'}"
    block = ex.block()
    assert block.splitlines()[0] == f"[{ex.label}]"
    assert "4 | 2026-11-29 02:00:40 rsync_mirror: ERROR share photos" in block
    assert [n for n, _ in ex.issues] == [4, 5, 6]
    queries = issue_queries([ex])
    assert queries[0].startswith("rsync_mirror: ERROR share photos")
    assert "rsync_mirror: finished, exit 3" in queries
    assert "rsync_mirror: ERROR share photos: delete ratio 18.9% above ceiling 5%, skipped" in queries


def test_absolute_path_under_the_folder_is_accepted(troubleshoot, settings, log_dir):
    (log_dir / "sub").mkdir()
    (log_dir / "sub" / "a.log").write_text("one\n", encoding="utf-8")
    [ex] = read_log(troubleshoot, settings, str(log_dir / "sub" / "a.log"))
    assert ex.lines == ["one"]


def test_huge_log_reads_only_the_tail_and_numbers_it_correctly(troubleshoot, settings, log_dir):
    path = log_dir / "huge.log"
    n = 400_000  # about 14 MB
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(f"line {i:07d} padding padding\n" for i in range(1, n + 1))
    [ex] = read_log(troubleshoot, settings, "huge.log")
    assert ex.total_lines == n and ex.last_line == n and ex.truncated
    assert ex.lines[-1] == f"line {n:07d} padding padding"
    assert ex.lines[0] == f"line {ex.first_line:07d} padding padding"
    assert sum(len(line) + 1 for line in ex.lines) <= MAX_BYTES
    assert len(ex.lines) <= 200


def test_tail_budget_never_starts_mid_line(troubleshoot, settings, log_dir):
    path = log_dir / "cut.log"
    path.write_bytes(b"".join(b"%05d " % i + b"x" * 90 + b"\n" for i in range(1, 1001)))
    [ex] = read_log(troubleshoot, settings, "cut.log", max_bytes=1000)
    assert all(len(line) == 96 for line in ex.lines)
    assert ex.lines[0].startswith(f"{ex.first_line:05d} ")
    assert ex.last_line == 1000


def test_log_without_final_newline_counts_its_last_line(troubleshoot, settings, log_dir):
    (log_dir / "open.log").write_bytes(b"a\nb\nc")
    [ex] = read_log(troubleshoot, settings, "open.log")
    assert (ex.first_line, ex.last_line, ex.lines) == (1, 3, ["a", "b", "c"])


def test_binary_noise_and_non_utf8_are_decoded_without_loss_of_the_rest(troubleshoot, settings,
                                                                         log_dir):
    noise = bytes(b for b in range(0, 32) if b != 10) * 4 + bytes(range(128, 256))
    (log_dir / "noisy.log").write_bytes(
        b"\x00\x00ERROR disk\x00 sdb failed\n"
        + noise + b"\n"
        + b"caf\xe9 au lait: WARN latin-1 byte\n"
        + b"ok \x1b[31mred\x1b[0m done\n")
    [ex] = read_log(troubleshoot, settings, "noisy.log")
    assert ex.lines[0] == "ERROR disk sdb failed"
    assert ex.lines[1].startswith("[binary data, ")
    assert ex.lines[2] == "caf\ufffd au lait: WARN latin-1 byte"
    assert ex.lines[3] == "ok ?[31mred?[0m done"
    assert [n for n, _ in ex.issues] == [1, 3]
    assert "\x00" not in ex.block()


def test_decode_line_cuts_very_long_lines():
    text = decode_line(b"x" * 5000)
    assert text.startswith("x" * 400) and "4600 more characters" in text


def test_rotated_gzip_log_is_decompressed_and_numbered(troubleshoot, settings, log_dir):
    with gzip.open(log_dir / "rsync_mirror.log.2.gz", "wb") as fh:
        fh.write(b"".join(b"old line %d\n" % i for i in range(1, 51)) + b"ERROR old failure\n")
    [ex] = read_log(troubleshoot, settings, "rsync_mirror.log.2.gz")
    assert (ex.first_line, ex.last_line, ex.total_lines) == (1, 51, 51)
    assert ex.lines[-1] == "ERROR old failure"


def test_truncated_gzip_keeps_what_was_readable(troubleshoot, settings, log_dir):
    data = gzip.compress(b"".join(b"entry %d\n" % i for i in range(1, 2001)))
    (log_dir / "broken.log.1.gz").write_bytes(data[: len(data) // 2])
    [ex] = read_log(troubleshoot, settings, "broken.log.1.gz")
    assert ex.lines and ex.lines[0].startswith("entry ")


def test_just_rotated_log_also_reads_the_previous_rotation(troubleshoot, settings, log_dir):
    (log_dir / "app.log").write_text("2026-11-29 03:00:00 app: starting\n", encoding="utf-8")
    (log_dir / "app.log.1").write_text(
        "".join(f"2026-11-28 23:00:{i:02d} app: tick {i}\n" for i in range(1, 31))
        + "2026-11-28 23:59:59 app: FATAL database locked\n", encoding="utf-8")
    excerpts = read_log(troubleshoot, settings, "app.log")
    assert [e.path.name for e in excerpts] == ["app.log", "app.log.1"]
    assert excerpts[1].label == f"log lines 1-31 of {log_dir / 'app.log.1'}"
    assert "database locked" in issue_queries(excerpts)[0]


def test_symlink_pointing_outside_the_log_folder_is_refused(troubleshoot, settings, log_dir,
                                                             tmp_path):
    outside = tmp_path / "outside-secret.txt"
    outside.write_text("not for the model\n", encoding="utf-8")
    (log_dir / "innocent.log").symlink_to(outside)
    with pytest.raises(LogAccessDenied, match="outside"):
        read_log(troubleshoot, settings, "innocent.log")
    (log_dir / "linkdir").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(LogAccessDenied):
        read_log(troubleshoot, settings, "linkdir/outside-secret.txt")


def test_symlink_inside_the_folder_is_followed(troubleshoot, settings, log_dir):
    (log_dir / "real.log").write_text("inside\n", encoding="utf-8")
    (log_dir / "current.log").symlink_to(log_dir / "real.log")
    [ex] = read_log(troubleshoot, settings, "current.log")
    assert ex.lines == ["inside"] and ex.path == log_dir / "real.log"


@pytest.mark.parametrize("requested", ["../outside-secret.txt", "sub/../../outside-secret.txt",
                                       "/etc/passwd", "/etc/../etc/passwd"])
def test_traversal_and_paths_outside_are_refused(troubleshoot, settings, log_dir, tmp_path,
                                                 requested):
    (tmp_path / "outside-secret.txt").write_text("x\n", encoding="utf-8")
    (log_dir / "sub").mkdir()
    with pytest.raises(LogAccessDenied):
        read_log(troubleshoot, settings, requested)


def test_missing_log_and_directories_are_reported(troubleshoot, settings, log_dir):
    with pytest.raises(LogNotFound):
        read_log(troubleshoot, settings, "nope.log")
    (log_dir / "adir").mkdir()
    with pytest.raises(LogAccessDenied, match="regular file"):
        read_log(troubleshoot, settings, "adir")


def test_no_configured_folder_means_no_log(troubleshoot, settings, tmp_path):
    empty = settings.replace(ai_troubleshoot_log_dirs=(str(tmp_path / "absent"),))
    with pytest.raises(LogAccessDenied, match="no log folder"):
        resolve_log(empty, "x.log")


def test_list_logs_offers_only_readable_logs_inside(troubleshoot, settings, log_dir, tmp_path):
    (log_dir / "a.log").write_text("a\n", encoding="utf-8")
    (log_dir / "nested").mkdir()
    (log_dir / "nested" / "b.log.1.gz").write_bytes(gzip.compress(b"b\n"))
    (tmp_path / "secret.log").write_text("s\n", encoding="utf-8")
    (log_dir / "escape.log").symlink_to(tmp_path / "secret.log")
    (log_dir / "picture.png").write_bytes(b"\x89PNG")
    os.utime(log_dir / "a.log", (2_000_000_000, 2_000_000_000))
    items = list_logs(troubleshoot, settings)
    assert [i["name"] for i in items] == ["a.log", "nested/b.log.1.gz"]
    assert items[0]["path"] == str(log_dir / "a.log") and items[0]["size"] == 2
