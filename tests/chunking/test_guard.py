"""The per-file guard (varaverk.documents.guard): real failures become one file's skip reason,
errors of the run pass through, and the time bound is per file and per thread."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from varaverk.documents import guard
from varaverk.errors import VaraverkError


def _recurse(n: int) -> int:
    return _recurse(n + 1) + 1


def _spin(seconds: float) -> str:
    """Work that calls checkpoint as a parser's loop does, for ``seconds``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        guard.checkpoint()
        time.sleep(0.001)
    return "done"


def test_a_result_comes_back_untouched():
    assert guard.attempt("a.md", lambda: [1, 2]) == ([1, 2], "")


@pytest.mark.parametrize("work, detail", [
    (lambda: _recurse(0), "RecursionError: nested too deeply"),
    (lambda: bytearray(1 << 62), "MemoryError: too large to hold in memory"),
    (lambda: int("9" * 5000), "ValueError: Exceeds the limit (4300 digits)"),
    (lambda: {}["x"], "KeyError: 'x'"),
], ids=["recursion", "memory", "value", "key"])
def test_a_failure_becomes_the_files_skip_reason_and_a_warning(work, detail, caplog):
    with caplog.at_level(logging.WARNING):
        result, reason = guard.attempt("notes/bad.md", work)
    assert result is None
    assert reason.startswith(f"{guard.REASON_FAILED} ({detail}")
    assert f"notes/bad.md: skipped: {reason}" in caplog.text


def test_a_long_message_is_shortened():
    _, reason = guard.attempt("a", lambda: (_ for _ in ()).throw(ValueError("x" * 5000)))
    assert len(reason) < 300 and reason.endswith("\u2026)")


def test_errors_of_the_run_and_interrupts_pass_through():
    def no_embedder():
        raise VaraverkError("no embedding server")

    with pytest.raises(VaraverkError):
        guard.attempt("a.md", no_embedder)
    with pytest.raises(KeyboardInterrupt):
        guard.attempt("a.md", lambda: (_ for _ in ()).throw(KeyboardInterrupt()))


def test_an_overrun_is_cut_short_at_the_next_checkpoint():
    started = time.monotonic()
    result, reason = guard.attempt("chats:big.txt", lambda: _spin(30), seconds=0.2)
    assert result is None and reason == f"{guard.REASON_FAILED} (took more than 0.2 s)"
    assert time.monotonic() - started < 5


def test_checkpoint_outside_the_guard_does_nothing():
    guard.checkpoint()
    assert _spin(0.01) == "done"


def test_a_nested_files_time_is_not_charged_to_the_outer_file():
    def outer():
        inner = guard.attempt("vault:b.md", lambda: _spin(0.3), seconds=1)
        guard.checkpoint()  # 0.3 s spent, outer bound 0.2 s: not charged
        return inner

    assert guard.attempt("vault:a.md", outer, seconds=0.2) == (("done", ""), "")


def test_a_deadline_belongs_to_its_thread():
    results = {}

    def slow_file():
        results["slow"] = guard.attempt("slow.md", lambda: _spin(0.6), seconds=0.1)

    def other_thread():  # runs past the other thread's deadline, outside any guard
        results["free"] = _spin(0.6)

    threads = [threading.Thread(target=slow_file), threading.Thread(target=other_thread)]
    for t in threads:
        t.start()
    with_guard = guard.attempt("main.md", lambda: _spin(0.6), seconds=5)
    for t in threads:
        t.join()
    assert results["slow"][0] is None and "took more than 0.1 s" in results["slow"][1]
    assert results["free"] == "done" and with_guard == ("done", "")


def test_the_default_bound_grows_with_the_files_size(monkeypatch):
    monkeypatch.setattr(guard, "FILE_SECONDS", 0.1)
    monkeypatch.setattr(guard, "SECONDS_PER_MIB", 0.2)
    assert guard.attempt("small", lambda: _spin(0.5))[1].endswith("(took more than 0.1 s)")
    assert guard.attempt("big", lambda: _spin(0.5), size=4 << 20) == ("done", "")
