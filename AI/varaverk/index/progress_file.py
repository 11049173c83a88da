"""Index progress: where a running refresh says how far it is, so the dock can show it.

While ``refresh`` holds the index lock it keeps ``<index file>.progress.json`` up to date
(``{"pid", "phase", "done", "total", "started", "updated"}``; phase ``reading``,
``embedding`` or ``writing``; done/total counted in chunks while embedding, else 0; times in
Unix seconds) and removes it when the run ends, however it ends. A file left by a killed run
names a process that is gone (or one not updated for STALE_SECONDS), and reads as no run.
Writes are atomic and at most one a second, so a reader never sees half a file.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from varaverk.atomic_files import write_atomic

log = logging.getLogger("varaverk.index")

SUFFIX = ".progress.json"
MIN_INTERVAL_S = 1.0    # between two writes of the same phase
STALE_SECONDS = 600     # no update for this long: the run is taken as dead


def progress_path(index_path: str | os.PathLike) -> Path:
    """The progress file of the index at ``index_path``."""
    return Path(str(index_path) + SUFFIX)


class ProgressFile:
    """The progress file of one refresh run; a context manager that removes it on exit.

    A failure to write (a full disk, a read-only folder) is logged once and never stops
    the run: progress is a courtesy, the index is the work.
    """

    def __init__(self, index_path: str | os.PathLike):
        self.path = progress_path(index_path)
        self.started = time.time()
        self.phase = ""
        self._last = 0.0
        self._broken = False

    def __enter__(self) -> "ProgressFile":
        self.set_phase("reading")
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        except OSError as err:
            log.warning("cannot remove the index progress file %s: %s", self.path, err)

    def set_phase(self, phase: str, done: int = 0, total: int = 0) -> None:
        """Enter ``phase`` (written at once)."""
        self.phase = phase
        self._write(done, total)

    def update(self, done: int, total: int) -> None:
        """Embedding progress: ``done`` of ``total`` chunks (written at most once a second,
        and always for the last one)."""
        if self.phase != "embedding":
            self.set_phase("embedding", done, total)
        elif done >= total or time.monotonic() - self._last >= MIN_INTERVAL_S:
            self._write(done, total)

    def _write(self, done: int, total: int) -> None:
        if self._broken:
            return
        self._last = time.monotonic()
        body = {"pid": os.getpid(), "phase": self.phase, "done": int(done), "total": int(total),
                "started": round(self.started, 3), "updated": round(time.time(), 3)}
        try:
            # Not durable: a file lost to a power cut names a dead run, which reads as none.
            write_atomic(self.path, json.dumps(body).encode("utf-8"), durable=False)
        except OSError as err:
            self._broken = True
            log.warning("cannot write the index progress file %s: %s (the run goes on)",
                        self.path, err)


def _alive(pid: object) -> bool:
    if type(pid) is not int or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, run by another user
        return True
    return True


def read_progress(index_path: str | os.PathLike) -> dict | None:
    """The running refresh's progress (the file's fields), or None when no run is going on:
    no file, an unreadable one, or one whose process is gone or silent for STALE_SECONDS.

    Only meaningful on the host that runs the refresh (the pid is checked locally).
    """
    try:
        body = json.loads(progress_path(index_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(body, dict) or not _alive(body.get("pid")):
        return None
    updated = body.get("updated")
    if type(updated) not in (int, float) or time.time() - updated > STALE_SECONDS:
        return None
    return {k: body.get(k) for k in ("phase", "done", "total", "started", "updated")}
