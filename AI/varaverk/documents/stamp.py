"""The re-chunk stamp: a checksum of the code that turns a tracked file into chunks.

The index stores ``chunker_stamp()``; when an upgrade changes that code, the next refresh
re-reads and re-chunks every document instead of trusting chunks made by the old rules (chunks
whose text comes out the same keep their vectors). The stamp covers every module of this
package and of ``varaverk.masking`` (the masking rules decide what text reaches the chunkers),
so a new chunker or masking module needs no list to be kept. The files are read, never
imported: the no-op refresh computes the stamp and must stay light.
"""

from __future__ import annotations

import binascii
import os
from pathlib import Path

_DOCUMENTS = Path(__file__).parent
# A change to what is masked changes chunk texts: it must re-chunk every document too.
_MASKING = _DOCUMENTS.parent / "masking"
STAMPED_PACKAGES = (_DOCUMENTS, _MASKING)


def chunker_stamp() -> str:
    """The stamp of this installation's chunking and masking code: 8 hex digits (CRC-32)."""
    return code_stamp(*STAMPED_PACKAGES)


def code_stamp(*packages: Path) -> str:
    """A CRC-32 (8 hex digits) of every ``.py`` file under each of ``packages``, in turn.

    Each package's files are taken in the order of their relative paths, and each one's path
    (``masking/values.py``) counts as well as its bytes, so adding, removing, renaming or
    moving a module changes the stamp (an empty ``__init__.py`` too). A package that is not
    there counts as empty; a file that cannot be read counts by its name only.
    """
    crc = 0
    for package in packages:
        for name, path in sorted(_modules(package)):
            crc = binascii.crc32(f"{package.name}/{name}".encode(), crc)
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
