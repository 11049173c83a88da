"""Text for a person's terminal: control characters made visible, never interpreted.

Model output and tracked documents are untrusted: an ESC or OSC sequence in them
(``\\x1b]52;c;...\\x07`` writes the clipboard, ``\\x1b]0;...`` the window title, CSI moves
the cursor to fake earlier output) would act on the reader's terminal. Human output shows each
such character as an escape (``\\x1b``) instead. ``--json`` output needs none of this: JSON
escapes control characters itself.
"""

from __future__ import annotations

import contextlib
import re
import sys
from typing import Iterator, TextIO

# C0 controls but tab and newline, DEL, C1 controls (0x9b is an 8-bit CSI), and the bidi
# overrides that reorder what is shown.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def neutralise(text: str) -> str:
    """``text`` with every control character but tab and newline shown as ``\\xNN``."""
    return _CONTROL.sub(_visible, text)


class SafeWriter:
    """A text stream whose ``write`` neutralises control characters (``neutralise``).

    ``write_styled`` lets the program's own styling codes (dim, reset) through around
    neutralised text. Everything else (``flush``, ``isatty``, ``fileno``...) is the stream's.
    """

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(neutralise(text))

    def write_styled(self, before: str, text: str, after: str) -> int:
        return self._stream.write(before + neutralise(text) + after)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def human_output(enabled: bool = True) -> Iterator[None]:
    """While inside, ``sys.stdout`` and ``sys.stderr`` are ``SafeWriter``s (when ``enabled``:
    pass False for ``--json`` output)."""
    if not enabled:
        yield
        return
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = SafeWriter(sys.stdout), SafeWriter(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
