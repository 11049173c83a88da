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

LOG_MAX_BYTES = 1 << 20
LOG_BACKUPS = 5


def rotate_at_start(log_file: str | os.PathLike, max_bytes: int = LOG_MAX_BYTES,
                    backups: int = LOG_BACKUPS) -> None:
    """Shift ``log_file`` to ``.1`` (``.1`` to ``.2`` ... dropping ``.<backups>``) when it has
    grown past ``max_bytes``. A race between two starting processes costs at most one extra
    shift; a missing file is fine."""
    log_file = os.fspath(log_file)
    try:
        if os.stat(log_file).st_size <= max_bytes:
            return
    except FileNotFoundError:
        return
    for n in range(backups - 1, 0, -1):
        if os.path.exists(f"{log_file}.{n}"):
            os.replace(f"{log_file}.{n}", f"{log_file}.{n + 1}")
    try:
        os.replace(log_file, f"{log_file}.1")
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
                secrets: list[str] = ()) -> str:
    """Append one record to ``log_dir/<program>.log`` (rotated first, as ``setup_logging``
    does), logger ``varaverk.<program>``, ``level`` as logging names it (``INFO``); the
    values of ``secrets`` (4 characters or more) read ``<redacted>``, control characters
    are escaped. Returns the file's path; raises OSError."""
    message = redact(message, secrets)
    now = time.time()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
    line = (f"{stamp},{int((now - int(now)) * 1000):03d} {program}[{os.getpid()}] {level} "
            f"varaverk.{program.replace('-', '_')}: {message}")
    if not line.isprintable():  # the terminal module (re, typing) only for a line that needs it
        from varaverk.terminal import neutralise
        line = neutralise(line)
    os.makedirs(log_dir, exist_ok=True)
    log_file = os.path.join(log_dir, f"{program}.log")
    rotate_at_start(log_file)
    with open(log_file, "a", encoding="utf-8") as handle:  # O_APPEND: lines never interleave
        handle.write(line + "\n")
    return log_file
