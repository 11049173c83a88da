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

from varaverk.config import SECRET_KEYS, Settings, load_settings
from varaverk.log_files import redact, redactable, rotate_at_start
from varaverk.terminal import neutralise

# Pass as ``extra=DETAIL`` for per-file lines (a skipped file and its reason): they go to the
# log file always, to the terminal only with --verbose; the run's summary line counts them.
DETAIL = {"detail": True}

_OURS = "_varaverk_handler"
# What the last setup_logging call was given, for record_failure when no log file is open.
_last: dict[str, object] = {"log_dir": None, "secrets": []}


class RedactSecrets(logging.Filter):
    """Replaces the values of secret settings with ``<redacted>`` in a record's message."""

    def __init__(self, secrets: list[str]):
        super().__init__()
        self._secrets = redactable(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite ``record.msg`` (args merged in) when it holds a secret; always True (keep it)."""
        if self._secrets:
            message = record.getMessage()
            if any(s in message for s in self._secrets):
                record.msg, record.args = redact(message, self._secrets), None
        return True


def early_stderr(program: str) -> None:
    """Warnings on stderr in ``program``'s format until ``setup_logging`` runs.

    Loading the settings happens before logging can be set up (the log folder is a setting),
    and what it warns about (an unknown key, a ``$VAR`` kept literally) must still read
    ``ai-index: warning: ...``. ``setup_logging`` replaces this handler.
    """
    if not _our_handlers():
        logging.getLogger("varaverk").addHandler(_stderr_handler(program, logging.WARNING))


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
    for handler in _our_handlers():
        root.removeHandler(handler)
        handler.close()
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    root.propagate = False
    secrets = [getattr(settings, k.lower(), "") or "" for k in SECRET_KEYS]
    redact = RedactSecrets(secrets)
    _last.update(log_dir=Path(settings.ai_log_dir), secrets=secrets)

    err = _stderr_handler(program, logging.DEBUG if verbose
                          else logging.WARNING if quiet else logging.INFO)
    err.addFilter(redact)
    if not verbose:
        err.addFilter(lambda record: not getattr(record, "detail", False))
    root.addHandler(err)

    if to_file:
        fh = _file_handler(Path(settings.ai_log_dir), program, redact)
        fh.setLevel(logging.DEBUG if verbose else logging.INFO)
        root.addHandler(fh)
    return logging.getLogger(f"varaverk.{program.replace('-', '_')}")


def _stderr_handler(program: str, level: int) -> logging.Handler:
    """A stderr handler of ours at ``level``, lines as ``_StderrFormatter`` writes them."""
    err = logging.StreamHandler(sys.stderr)
    err.setLevel(level)
    err.setFormatter(_StderrFormatter(program))
    setattr(err, _OURS, True)
    return err


def _file_handler(log_dir: Path, program: str, redact: logging.Filter) -> logging.FileHandler:
    """An appending handler on ``log_dir/<program>.log`` (rotated first when too big)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log_file = log_dir / f"{program}.log"
    rotate_at_start(log_file)
    fh = logging.FileHandler(log_file, encoding="utf-8")
    fh.setFormatter(_NeutralFormatter(
        f"%(asctime)s {program}[%(process)d] %(levelname)s %(name)s: %(message)s"))
    fh.addFilter(redact)
    setattr(fh, _OURS, True)
    return fh


def _our_handlers() -> list[logging.Handler]:
    return [h for h in logging.getLogger("varaverk").handlers if getattr(h, _OURS, False)]


def report_error(program: str, message: str, exc: BaseException | None = None) -> None:
    """One error line ``<program>: <message>`` on stderr; with ``exc``, the same line and the
    traceback go to the log file too, when the log folder is known (set up, or named by
    ``AI_LOG_DIR``: a bad configuration may be what failed)."""
    print(f"{program}: {message}", file=sys.stderr)
    if exc is not None:
        _write_to_log(program, _record(program, "%s", (message,), exc), use_default=False)


def record_failure(program: str, exc: BaseException) -> Path | None:
    """Write ``exc`` with its traceback to ``program``'s log file, never to stderr.

    Uses the file ``setup_logging`` opened; a command that keeps no log (``--status``,
    ``AI_ENABLED=false``, a failure before logging was set up) opens
    ``<AI_LOG_DIR>/<program>.log`` for this one record, so an exit-1 failure always leaves its
    traceback behind. Returns the file's path, or None when no log file could be written.
    """
    return _write_to_log(program, _record(program, "unexpected failure: %s: %s",
                                          (type(exc).__name__, exc), exc))


def _record(program: str, msg: str, args: tuple, exc: BaseException) -> logging.LogRecord:
    return logging.LogRecord(f"varaverk.{program.replace('-', '_')}", logging.ERROR, __file__, 0,
                             msg, args, (type(exc), exc, exc.__traceback__))


def _write_to_log(program: str, record: logging.LogRecord, use_default: bool = True
                  ) -> Path | None:
    files = [h for h in _our_handlers() if isinstance(h, logging.FileHandler)]
    opened = None
    if not files:
        log_dir = _failure_log_dir(use_default)
        if log_dir is None:
            return None
        try:
            opened = _file_handler(log_dir, program, RedactSecrets(list(_last["secrets"])))
        except OSError:
            return None
        files = [opened]
    try:
        for handler in files:
            handler.handle(record)
        return Path(files[0].baseFilename)
    finally:
        if opened is not None:
            opened.close()


def _failure_log_dir(use_default: bool) -> Path | None:
    """The log folder of the last setup_logging, else of the settings, else ``AI_LOG_DIR`` as
    written; else the default folder (when ``use_default``) or None."""
    if _last["log_dir"] is not None:
        return Path(_last["log_dir"])
    try:
        return load_settings().ai_log_dir
    except Exception:  # noqa: BLE001 - the configuration may be what failed
        raw = os.environ.get("AI_LOG_DIR", "").strip()
        if raw:
            return Path(os.path.expanduser(raw))
        return Settings().ai_log_dir if use_default else None


class _NeutralFormatter(logging.Formatter):
    """A log file line with control characters shown as escapes: file names and log text
    come from the repository, and a log is read with cat, less or tail -f."""

    def format(self, record: logging.LogRecord) -> str:
        return neutralise(super().format(record))


class _StderrFormatter(logging.Formatter):
    """``ai-index: message`` for INFO, ``ai-index: warning: message`` above."""

    def __init__(self, program: str):
        super().__init__()
        self.program = program

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info and record.levelno >= logging.ERROR:
            message += "\n" + self.formatException(record.exc_info)
        message = neutralise(message)  # a tracked file name may hold ESC sequences
        if record.levelno >= logging.WARNING:
            return f"{self.program}: {record.levelname.lower()}: {message}"
        return f"{self.program}: {message}"
