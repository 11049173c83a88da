"""Log files without the logging module: rotation at process start and one appended line in
the format ``varaverk.logs`` writes.

``varaverk.logs`` rotates with ``rotate_at_start``; a command path that must not pay for
importing ``logging`` (the no-op ``ai-index``: ``varaverk.index.fingerprint``) appends its one
line with ``append_line``, which reads exactly as a ``logging`` record of that program would:
``2026-12-02 09:29:23,353 ai-index[17520] INFO varaverk.ai_index: message``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from varaverk.terminal import neutralise

LOG_MAX_BYTES = 1 << 20
LOG_BACKUPS = 5


def rotate_at_start(log_file: Path, max_bytes: int = LOG_MAX_BYTES,
                    backups: int = LOG_BACKUPS) -> None:
    """Shift ``log_file`` to ``.1`` (``.1`` to ``.2`` ... dropping ``.<backups>``) when it has
    grown past ``max_bytes``. A race between two starting processes costs at most one extra
    shift; a missing file is fine."""
    try:
        if log_file.stat().st_size <= max_bytes:
            return
    except FileNotFoundError:
        return
    for n in range(backups - 1, 0, -1):
        older = log_file.with_name(f"{log_file.name}.{n}")
        if older.exists():
            os.replace(older, log_file.with_name(f"{log_file.name}.{n + 1}"))
    try:
        os.replace(log_file, log_file.with_name(f"{log_file.name}.1"))
    except FileNotFoundError:
        pass


def redactable(secrets) -> list[str]:
    """The secret values worth redacting: those of 4 characters or more (a shorter one would
    redact ordinary words)."""
    return [s for s in secrets if s and len(s) >= 4]


def redact(message: str, secrets: list[str]) -> str:
    """``message`` with every value of ``redactable(secrets)`` read as ``<redacted>``."""
    for secret in redactable(secrets):
        message = message.replace(secret, "<redacted>")
    return message


def append_line(log_dir: str | os.PathLike, program: str, level: str, message: str,
                secrets: list[str] = ()) -> Path:
    """Append one record to ``log_dir/<program>.log`` (rotated first, as ``setup_logging``
    does), logger ``varaverk.<program>``, ``level`` as logging names it (``INFO``); the
    values of ``secrets`` (4 characters or more) read ``<redacted>``, control characters
    are escaped. Returns the file's path; raises OSError."""
    message = redact(message, secrets)
    now = time.time()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
    line = (f"{stamp},{int((now - int(now)) * 1000):03d} {program}[{os.getpid()}] {level} "
            f"varaverk.{program.replace('-', '_')}: {message}")
    folder = Path(log_dir)
    folder.mkdir(parents=True, exist_ok=True)
    log_file = folder / f"{program}.log"
    rotate_at_start(log_file)
    with open(log_file, "a", encoding="utf-8") as handle:  # O_APPEND: lines never interleave
        handle.write(neutralise(line) + "\n")
    return log_file
