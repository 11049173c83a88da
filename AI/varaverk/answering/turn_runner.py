"""Turns run in the background of the process that accepted them, writing to the turn log.

``TurnRunner.start`` runs one turn's event stream (``varaverk.answering.answer.run_turn``) in a
thread of its own and appends each event to the ``TurnLog``, so the turn goes on whoever is
attached, and a closed browser tab stops nothing. One watcher thread per process polls the log
every ``poll_seconds`` for stop requests on the turns this process runs (Stop may be pressed in
a tab served by another worker) and refreshes their heartbeat every ``HEARTBEAT_SECONDS``.

A stop finishes the turn at once, whatever the model is doing: the watcher writes the
``stopped`` event (the partial answer and reasoning so far) and whatever the ``finish`` hook
adds (the dock's ``saved``), then shuts down the model connections the turn's thread has open
(``bounded_http.cancellable``): the model server sees the connection close and stops generating,
even before its first token, and the turn's thread ends. Exactly one terminal event (``done``, ``error`` or ``stopped``) is written per turn:
writing is serialised per turn, and nothing is written after it.

The ``finish`` hook is the caller's: ``finish(kind, data) -> list[(type, data)]`` for ``kind``
``done`` or ``stopped``; it may add keys to ``data`` (the dock adds the rendered ``html``) and
returns the events to write after it (the dock's ``saved``). It runs in the thread that ends
the turn, under the turn's lock.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from varaverk import bounded_http
from varaverk.answering.turn_log import TurnLog

log = logging.getLogger("varaverk.answering.turns")

HEARTBEAT_SECONDS = 5.0
Finish = Callable[[str, dict], list]


@dataclass
class _LiveTurn:
    """What this process knows of a turn it runs: the next seq and the answer so far."""

    turn_id: str
    finish: Finish
    next_seq: int = 2  # seq 1 is ``start``, written by ``TurnLog.begin``
    answer: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    sources: list = field(default_factory=list)
    profile: str | None = None
    finished: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    # the turn's open model connections, shut down when the turn ends from another thread
    connections: bounded_http.CancelScope = field(default_factory=bounded_http.CancelScope)


class TurnRunner:
    """The turns this process runs. Thread-safe; one per process (per dock app).

    Args:
        turn_log: where events go.
        poll_seconds: how often the watcher looks for stop requests (a Stop takes effect
            within about this long, plus one write).
    """

    def __init__(self, turn_log: TurnLog, poll_seconds: float = 0.2):
        self.turn_log = turn_log
        self.poll_seconds = poll_seconds
        self._live: dict[str, _LiveTurn] = {}
        self._lock = threading.Lock()
        self._watcher: threading.Thread | None = None
        self._wake = threading.Event()

    def running(self) -> list[str]:
        """Ids of the turns this process is running now."""
        with self._lock:
            return list(self._live)

    def start(self, turn_id: str, events: Iterator, finish: Finish) -> threading.Thread:
        """Run ``events`` (TurnEvents with ``type`` and ``data``) for ``turn_id`` in a new
        daemon thread; returns the thread."""
        live = _LiveTurn(turn_id=turn_id, finish=finish)
        with self._lock:
            self._live[turn_id] = live
            self._ensure_watcher()
        thread = threading.Thread(target=self._run, args=(live, events),
                                  name=f"turn-{turn_id[:8]}", daemon=True)
        thread.start()
        self._wake.set()
        return thread

    # ── the turn's thread ──────────────────────────────────────────────────────────────────

    def _run(self, live: _LiveTurn, events: Iterator) -> None:
        try:
            with bounded_http.cancellable(live.connections):
                for event in events:
                    if not self._take(live, event.type, dict(event.data)):
                        break
                else:
                    self._end(live, "error", {"message": "the turn ended without a result",
                                              "kind": "failure"})
        except Exception as exc:  # a bug or an unexpected failure: the turn still ends
            if live.finished:  # stopped meanwhile: its cancelled connection broke the stream
                log.info("turn %s: its stream ended after the stop (%s)", live.turn_id, exc)
                return
            log.exception("turn %s failed", live.turn_id)
            self._end(live, "error", {"message": f"the turn failed: {type(exc).__name__}: "
                                                 f"{exc}", "kind": "failure"})
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()  # ends the model stream when the turn was stopped meanwhile
            with self._lock:
                self._live.pop(live.turn_id, None)
            self.turn_log.close()

    def _take(self, live: _LiveTurn, kind: str, data: dict) -> bool:
        """Write one event; False once the turn is finished (stopped, done or failed)."""
        if kind in ("done", "error"):
            self._end(live, kind, data)
            return False
        with live.lock:
            if live.finished:
                return False
            if kind == "content":
                live.answer.append(str(data.get("text") or ""))
            elif kind == "thinking":
                live.thinking.append(str(data.get("text") or ""))
            elif kind == "sources":
                live.sources = data.get("sources") or []
            elif kind == "profile":
                live.profile = data.get("profile")
            live.next_seq = self.turn_log.append(live.turn_id, live.next_seq, [(kind, data)])
        return True

    def _end(self, live: _LiveTurn, kind: str, data: dict | None) -> None:
        """Write the terminal event (and the hook's events after done/stopped), once;
        ``data`` None: the partial answer so far (a stop)."""
        with live.lock:
            if live.finished:
                return
            live.finished = True
            if data is None:
                data = {"answer": "".join(live.answer), "reasoning": "".join(live.thinking),
                        "sources": live.sources, "profile": live.profile}
            extra: list = []
            if kind in ("done", "stopped"):
                try:
                    extra = list(live.finish(kind, data))
                except Exception as exc:
                    log.exception("turn %s: finishing failed", live.turn_id)
                    extra = [("saved", {"chat_id": None, "title": None,
                                        "error": f"not saved: {exc}"})]
            try:
                live.next_seq = self.turn_log.append(live.turn_id, live.next_seq,
                                                     [(kind, data), *extra], status=kind)
            except Exception:
                log.exception("turn %s: the %s event could not be written", live.turn_id, kind)
        live.connections.cancel()  # a no-op for a turn that ended on its own thread

    # ── the watcher ────────────────────────────────────────────────────────────────────────

    def _ensure_watcher(self) -> None:
        if self._watcher is None or not self._watcher.is_alive():
            self._watcher = threading.Thread(target=self._watch, name="turn-watcher",
                                             daemon=True)
            self._watcher.start()

    def _watch(self) -> None:
        last_beat = 0.0
        while True:
            ids = self.running()
            if not ids:
                self._wake.wait(timeout=5.0)
                self._wake.clear()
                continue
            try:
                for turn_id in self.turn_log.stop_requests(ids):
                    self.stop_here(turn_id)
                if time.monotonic() - last_beat >= HEARTBEAT_SECONDS:
                    self.turn_log.heartbeat(ids)
                    last_beat = time.monotonic()
            except Exception:  # a locked or vanished file: try again at the next poll
                log.exception("turn watcher: polling the turn log failed")
            time.sleep(self.poll_seconds)

    def interrupt_all(self, message: str) -> int:
        """End every turn this process runs with an error event (kind ``interrupted``): the
        process is going away (a restart), so pages learn it now rather than when the turn's
        heartbeat goes stale. Returns how many were ended."""
        with self._lock:
            live = list(self._live.values())
        for one in live:
            self._end(one, "error", {"message": message, "kind": "interrupted"})
        return len(live)

    def stop_here(self, turn_id: str) -> bool:
        """Finish a turn this process runs as ``stopped`` with its partial answer; False
        when it is not running here (anymore)."""
        with self._lock:
            live = self._live.get(turn_id)
        if live is None:
            return False
        self._end(live, "stopped", None)
        log.info("turn %s stopped on request", turn_id)
        return True
