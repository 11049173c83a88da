"""Hostile partners for ai-token-sync: one that trickles a byte every 2 s is cut off at the
deadline while the next partner is still synced; oversized fields are skipped and counted,
never cached in a shape that breaks /api/tokens or --totals-only."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import pytest

from tests.fleet.conftest import clean_env, fleet  # noqa: F401
from tests.fleet.test_fleet_sync import _add, _conf
from varaverk.ledger.fleet import cache_path
from varaverk.ledger.rows import LedgerError, LedgerRow, format_row
from varaverk.ledger.storage import read_rows
from varaverk_tools import ai_token_sync as sync
from varaverk_dock.app import create_app

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


class RawServer:
    """A raw HTTP server on 127.0.0.1 (threads, one per connection) running ``_one``."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


class Trickler(RawServer):
    """Answers 200 and then one byte every ``every`` s (``headers_too``: even the status line
    and headers a byte at a time)."""

    def __init__(self, every: float = 2.0, headers_too: bool = False):
        self.every, self.headers_too = every, headers_too
        super().__init__()

    def _one(self, conn) -> None:
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n")
        body = b"2026-01-01|10:00:00|slow|chat|cli|1|1|1.0\n" * 3000
        try:
            conn.recv(65536)
            if not self.headers_too:
                conn.sendall(head)
                head = b""
            for byte in head + body:
                if self.stop.is_set():
                    break
                conn.sendall(bytes([byte]))
                time.sleep(self.every)
        except OSError:
            pass
        finally:
            conn.close()


@pytest.mark.parametrize("headers_too", [False, True])
def test_trickling_partner_is_cut_at_the_deadline_and_the_next_is_synced(
        fleet, tmp_path, clean_env, headers_too):  # noqa: F811
    a, b = fleet["hostA"], fleet["hostB"]
    _add(b, 2)
    slow = Trickler(every=2.0, headers_too=headers_too)
    try:
        a.settings.ai_hosts_conf.write_text(f'aslow="{slow.url}"\nhostB="{b.url}"\n')
        conf = _conf(tmp_path, a.settings, AI_HTTP_TIMEOUT="5")
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "varaverk_tools.ai_token_sync", "--config", conf],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        elapsed = time.monotonic() - started
    finally:
        slow.close()
    print(f"trickling partner (headers_too={headers_too}): run ended in {elapsed:.1f} s "
          f"with AI_HTTP_TIMEOUT=5")
    assert proc.returncode == 1, proc.stderr  # one partner failed
    assert "no complete answer within 5 s" in proc.stderr
    assert cache_path(a.settings.ai_token_cache_dir, "hostB").is_file()
    assert not cache_path(a.settings.ai_token_cache_dir, "aslow").exists()
    # Only generous bounds here (no timing test): the run is not held for minutes.
    assert elapsed < 30


HUGE_5000 = "9" * 5000
HUGE_4300 = "9" * 4300


def test_oversized_fields_are_skipped_and_counted(fleet, tmp_path, clean_env, capsys):  # noqa: F811
    a, b = fleet["hostA"], fleet["hostB"]
    _add(b, 2)
    with open(b.ledger, "a") as fh:
        fh.write(f"2026-01-01|10:00:00|hostB|chat|cli|{HUGE_5000}|1|1.0\n")
        fh.write(f"2026-01-01|10:00:00|hostB|chat|cli|{HUGE_4300}|1|1.0\n")
        fh.write(f"2026-01-01|10:00:00|hostB|chat|cli|1|1|{HUGE_4300}.5\n")
        fh.write(f"2026-01-01|10:00:00|{'h' * 5000}|chat|cli|1|1|1.0\n")
    conf = _conf(tmp_path, a.settings)
    assert sync.main(["--config", conf]) == 0
    cached = cache_path(a.settings.ai_token_cache_dir, "hostB")
    rows, problems = read_rows(cached)
    assert len(rows) == 2 and len(problems) == 4
    assert any("prompt_tokens: 5000 digits, more than 12" in p for p in problems)
    assert all(len(p) < 300 for p in problems)  # the message does not echo the field
    assert sync.main(["--config", conf, "--totals-only"]) == 0
    out = capsys.readouterr().out
    assert "skipped:" in out and HUGE_4300 not in out
    resp = create_app(a.settings).test_client().get("/api/tokens")
    assert resp.status_code == 200
    assert HUGE_4300 not in resp.get_data(as_text=True)


def test_writer_refuses_a_count_it_could_not_read_back():
    row = LedgerRow("2026-01-01", "10:00:00", "h", "chat", "cli", 10 ** 12, 1, 1.0)
    with pytest.raises(LedgerError, match="more than 12 digits"):
        format_row(row)


class OneAnswer(RawServer):
    """Gives every request the same bytes (head + body)."""

    def __init__(self, head: bytes, body: bytes):
        self.answer = head + body
        super().__init__()

    def _one(self, conn) -> None:
        try:
            conn.recv(65536)
            conn.sendall(self.answer)
        except OSError:
            pass
        finally:
            conn.close()


def _bomb() -> bytes:
    import zlib
    line = b"2026-01-01|10:00:00|bomb|chat|cli|1|1|1.0\n"
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip framing
    block = line * (1 << 14)
    body = b"".join(packer.compress(block) for _ in range((96 << 20) // len(block)))
    return body + packer.flush()


@pytest.mark.parametrize("kind", ["gzip bomb", "html page", "endless body"])
def test_hostile_partner_bodies_never_replace_the_cache(fleet, kind):  # noqa: F811
    a = fleet["hostA"]
    cache = cache_path(a.settings.ai_token_cache_dir, "evil")
    cache.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    cache.write_bytes(b"2026-01-01|09:00:00|evil|chat|cli|5|5|1.0\n")
    if kind == "gzip bomb":
        body = _bomb()
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body))
        expected = "larger than"
    elif kind == "html page":
        body = b"<html>login</html>"
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 18\r\n\r\n"
        expected = "expected text/plain"
    else:
        body = b"2026-01-01|10:00:00|evil|chat|cli|1|1|1.0\n" * ((70 << 20) // 43)
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
        expected = "larger than"
    evil = OneAnswer(head, body)
    try:
        a.settings.ai_hosts_conf.write_text(f'evil="{evil.url}"\n')
        report = sync.sync_all(a.settings)
    finally:
        evil.close()
    assert report.outcomes == {"evil": sync.FAILED}
    assert expected in report.messages["evil"]
    assert cache.read_bytes() == b"2026-01-01|09:00:00|evil|chat|cli|5|5|1.0\n"
