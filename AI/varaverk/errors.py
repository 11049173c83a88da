"""The one error hierarchy: every error the library raises on purpose is a ``VaraverkError``.

Each subclass carries, once, what a caller needs to act on it:

    exit_code  what an entry point exits with (``varaverk.exitcodes``)
    kind       a short stable name for machines: the answer pipeline's error events and the
               dock's JSON errors carry it ("no_index", "mismatch", "unavailable", ...)
    fix        what the user should do, shown after the message when the message does not
               already say it
    label      what sort of error it is, shown before the message ("configuration error")

``varaverk.cli.run`` maps these to exit codes and one-line messages for every entry point;
``varaverk.answering.answer`` turns them into error events with their ``kind``; ``exit_code_for_kind``
maps a kind back to its code (the chat worker and ai-query read kinds off events).
"""

from __future__ import annotations

from varaverk import exitcodes

_CODES_BY_KIND: dict[str, int] = {}


class VaraverkError(Exception):
    """Base of Varaverk's errors. ``str(exc)`` is the message; see the module docstring."""

    exit_code: int = exitcodes.FAILURE
    kind: str = "failure"
    fix: str = ""
    label: str = ""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _CODES_BY_KIND.setdefault(cls.kind, cls.exit_code)

    def __str__(self) -> str:
        # KeyError-style bases quote their argument; a message is shown as written.
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()

    def one_line(self) -> str:
        """``label: message (fix)``; the fix only when the message does not already name it."""
        message = " ".join(str(self).split())
        if self.fix and self.fix.lower() not in message.lower():
            message += f" ({self.fix})"
        return f"{self.label}: {message}" if self.label else message


_CODES_BY_KIND[VaraverkError.kind] = VaraverkError.exit_code


def exit_code_for_kind(kind: str | None) -> int:
    """The exit code of errors of ``kind``; ``exitcodes.FAILURE`` for an unknown kind."""
    return _CODES_BY_KIND.get(kind or "", exitcodes.FAILURE)


class UsageError(VaraverkError, ValueError):
    """A command-line value that cannot be used (exit 2); the message says which and why."""

    exit_code = exitcodes.USAGE
    kind = "usage"
