"""One index run per index at a time.

``index_lock(index_path, timeout, command)`` holds ``<index_path>.lock`` with filelock (an OS
file lock: released by the kernel if the holder dies, so a crash never leaves a stale lock).
The holder writes who it is — pid, host, start time, command — into the sidecar
``<index_path>.lock.holder`` (JSON), so a second run that gives up after ``timeout`` seconds can
say exactly which run is in the way. The sidecar is informational only; the lock is the file lock.

filelock, json and socket are imported when a lock is taken, not at import time: a no-op
refresh never locks, and the indexer that imports this module runs on every refresh.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from varaverk import exitcodes
from varaverk.errors import VaraverkError


class LockBusy(VaraverkError, RuntimeError):
    """Another run held the index lock for longer than the timeout.

    Attributes:
        holder: the holder's sidecar record (``pid``, ``host``, ``started``, ``command``), or {}
            when it could not be read.
    """

    exit_code = exitcodes.LOCKED
    kind = "locked"

    def __init__(self, message: str, holder: dict):
        super().__init__(message)
        self.holder = holder


def lock_paths(index_path: str | os.PathLike) -> tuple[Path, Path]:
    """``(<index_path>.lock, <index_path>.lock.holder)``."""
    base = str(index_path)
    return Path(base + ".lock"), Path(base + ".lock.holder")


def read_holder(index_path: str | os.PathLike) -> dict:
    """The current holder record from the sidecar, or {} when absent or unreadable."""
    import json

    try:
        data = json.loads(lock_paths(index_path)[1].read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def describe_holder(holder: dict) -> str:
    """``pid 1234 on host nas01 since 2026-01-05T10:00:00+00:00 (ai-index --force)``."""
    if not holder:
        return "another run (holder unknown: it has not written its record yet)"
    text = f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}"
    if holder.get("started"):
        text += f" since {holder['started']}"
    if holder.get("command"):
        text += f" ({holder['command']})"
    return text


def _command_line() -> str:
    argv = [os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python", *sys.argv[1:]]
    return " ".join(argv)[:300]


@contextmanager
def index_lock(index_path: str | os.PathLike, timeout: float,
               command: str | None = None) -> Iterator[dict]:
    """Hold the index lock for the ``with`` block; yields this holder's record.

    Args:
        index_path: the SQLite index file the lock guards (its folder is created).
        timeout: seconds to wait for another holder (``AI_INDEX_LOCK_TIMEOUT``); 0 = try once.
        command: what to show other runs; default: this process's command line.

    Raises:
        LockBusy: still held by another run after ``timeout`` (message names the holder).
    """
    import json
    import socket

    from filelock import FileLock, Timeout

    lock_file, sidecar = lock_paths(index_path)
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(lock_file), timeout=max(0.0, float(timeout)), thread_local=False)
    try:
        lock.acquire()
    except Timeout:
        holder = read_holder(index_path)
        raise LockBusy(f"index {index_path} is locked by {describe_holder(holder)}; "
                       f"waited {timeout:g} s — try again later", holder) from None
    record = {
        "pid": os.getpid(), "host": socket.gethostname(),
        "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": command or _command_line(),
    }
    try:
        tmp = sidecar.with_name(sidecar.name + f".{os.getpid()}")
        tmp.write_text(json.dumps(record), encoding="utf-8")
        os.replace(tmp, sidecar)
        yield record
    finally:
        try:
            sidecar.unlink()
        except OSError:
            pass
        lock.release()
