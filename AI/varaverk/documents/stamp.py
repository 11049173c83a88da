"""The re-chunk stamp: a checksum of the code that turns a tracked file into chunks.

The index stores ``chunker_stamp()``; when an upgrade changes that code, the next refresh
re-reads and re-chunks every document instead of trusting chunks made by the old rules (chunks
whose text comes out the same keep their vectors). The stamp covers every module of this
package, so a new chunker needs no list to be kept, and the masking rules
(``varaverk.secret_patterns``), which decide what text reaches the chunkers. The files are read,
never imported: the no-op refresh computes the stamp and must stay light.
"""

from __future__ import annotations

import binascii
import os
from pathlib import Path
from typing import Iterable

_DOCUMENTS = Path(__file__).parent
# A change to what is masked changes chunk texts: it must re-chunk every document too.
_MASKING_RULES = _DOCUMENTS.parent / "secret_patterns.py"


def chunker_stamp() -> str:
    """The stamp of this installation's chunking code: 8 hex digits (CRC-32)."""
    return code_stamp(_DOCUMENTS, [_MASKING_RULES])


def code_stamp(package: Path, extra: Iterable[Path] = ()) -> str:
    """A CRC-32 (8 hex digits) of every ``.py`` file under ``package``, then of ``extra``.

    The package's files are taken in the order of their relative paths, and each one's path
    counts as well as its bytes, so adding, removing or renaming a module changes the stamp
    (an empty ``__init__.py`` too). A file that cannot be read counts by its name only.
    """
    files = sorted(_modules(package)) + [(path.name, path) for path in extra]
    crc = 0
    for name, path in files:
        crc = binascii.crc32(name.encode(), crc)
        try:
            crc = binascii.crc32(path.read_bytes(), crc)
        except OSError:  # not installed as a file: the name stands in
            crc = binascii.crc32(b"missing", crc)
    return f"{crc:08x}"


def _modules(package: Path) -> list[tuple[str, Path]]:
    """``(relative posix path, path)`` of every ``.py`` file under ``package``; os.walk, not
    ``rglob``, so that ``__pycache__`` is never listed (this runs on every refresh)."""
    out = []
    for root, folders, names in os.walk(package):
        folders[:] = [f for f in folders if f != "__pycache__"]
        for name in names:
            if name.endswith(".py"):
                path = Path(root, name)
                out.append((path.relative_to(package).as_posix(), path))
    return out
