"""Crash-safe whole-file writes: the one home for "write a temp file, fsync, rename over".

Used wherever a file is replaced as a whole (conversations, cached partner ledgers, ledger
pruning, bug report drafts). Appends to the ledger are a different protocol (``ledger.storage``).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

TMP_SUFFIX = ".tmp"


def write_atomic(path: str | os.PathLike, data: bytes, *, mode: int | None = 0o644,
                 sync_dir: bool = True, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves either the old or the new file.

    Args:
        path: the file to create or replace; its folder must exist.
        data: the complete new content.
        mode: permission bits of the new file (None keeps mkstemp's 0o600).
        sync_dir: also fsync the folder so the rename itself survives a power cut.
        durable: False skips every fsync: readers still see the old or the new file, never a
            mixture, but a power cut may lose the new one (a status file rewritten while a
            run goes on, where the fsyncs would cost the run more than the file is worth).

    The temporary file lives in the same folder (named ``.<name>.<random>.tmp``, so a cleaner
    can find leftovers of a killed writer) and is removed on any failure. Raises OSError.
    """
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=TMP_SUFFIX, dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if sync_dir and durable:
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
