"""Logging for entry points: a file under ``AI_LOG_DIR`` and stderr.

``setup_logging(settings, "ai-index")`` sends records of every ``varaverk*`` logger to
``AI_LOG_DIR/ai-index.log`` and to stderr. The file is rotated when a process starts (past
1 MiB, 5 kept), not while it runs: several processes append to one log (the dock's gunicorn
workers, a cron run beside a manual one), and a handler that renames the file under the others
would leave them writing into a rotated copy. Appends are O_APPEND, so lines never interleave
mid-line. This also keeps ``logging.handlers`` (and the socket module it pulls in) off the
start-up path of every command. Secret settings
(``AI_OPENAI_API_KEY``, ``AI_DOCK_TOKEN``, ``AI_FLEET_TOKEN``) are masked in every record, should
one ever reach a message.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from varaverk.config import SECRET_KEYS

# Pass as ``extra=DETAIL`` for per-file lines (a skipped file and its reason): they go to the
# log file always, to the terminal only with --verbose; the run's summary line counts them.
DETAIL = {"detail": True}

LOG_MAX_BYTES = 1 << 20
LOG_BACKUPS = 5
_OURS = "_varaverk_handler"


class RedactSecrets(logging.Filter):
    """Replaces the values of secret settings with ``<redacted>`` in a record's message."""

    def __init__(self, secrets: list[str]):
        super().__init__()
        self._secrets = [s for s in secrets if s and len(s) >= 4]

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite ``record.msg`` (args merged in) when it holds a secret; always True (keep it)."""
        if self._secrets:
            message = record.getMessage()
            if any(s in message for s in self._secrets):
                for s in self._secrets:
                    message = message.replace(s, "<redacted>")
                record.msg, record.args = message, None
        return True


def setup_logging(settings, program: str, verbose: bool = False, quiet: bool = False,
                  to_file: bool = True) -> logging.Logger:
    """Configure logging for one entry point and return its logger (``varaverk.<program>``).

    Args:
        settings: ``Settings`` (``ai_log_dir`` and the secret values to mask).
        program: the log file's base name and the stderr prefix (``ai-index``).
        verbose: DEBUG to both outputs. quiet: only warnings and errors on stderr.
        to_file: False writes nothing to disk (``--dry-run``, ``--status``).

    The file gets INFO and above (DEBUG with ``verbose``); calling again replaces the handlers
    this function installed before, so tests can call it repeatedly.
    """
    root = logging.getLogger("varaverk")
    for handler in list(root.handlers):
        if getattr(handler, _OURS, False):
            root.removeHandler(handler)
            handler.close()
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    root.propagate = False
    redact = RedactSecrets([getattr(settings, k.lower(), "") or "" for k in SECRET_KEYS])

    err = logging.StreamHandler(sys.stderr)
    err.setLevel(logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO)
    err.setFormatter(_StderrFormatter(program))
    err.addFilter(redact)
    if not verbose:
        err.addFilter(lambda record: not getattr(record, "detail", False))
    setattr(err, _OURS, True)
    root.addHandler(err)

    if to_file:
        log_dir = Path(settings.ai_log_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        log_file = log_dir / f"{program}.log"
        rotate_at_start(log_file)
        fh = logging.FileHandler(log_file, encoding="utf-8")
        fh.setLevel(logging.DEBUG if verbose else logging.INFO)
        fh.setFormatter(logging.Formatter(
            f"%(asctime)s {program}[%(process)d] %(levelname)s %(name)s: %(message)s"))
        fh.addFilter(redact)
        setattr(fh, _OURS, True)
        root.addHandler(fh)
    return logging.getLogger(f"varaverk.{program.replace('-', '_')}")


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


class _StderrFormatter(logging.Formatter):
    """``ai-index: message`` for INFO, ``ai-index: warning: message`` above."""

    def __init__(self, program: str):
        super().__init__()
        self.program = program

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info and record.levelno >= logging.ERROR:
            message += "\n" + self.formatException(record.exc_info)
        if record.levelno >= logging.WARNING:
            return f"{self.program}: {record.levelname.lower()}: {message}"
        return f"{self.program}: {message}"
