"""The errors of the index file, each a ``VaraverkError`` with its exit code, kind and fix.

They live beside the store, as every subsystem keeps its own (``SourcesError`` in
``varaverk.documents.tracked_files``, ``LockBusy`` in ``varaverk.locking``, ``EmbeddingError`` in
``varaverk.embedding``): ``varaverk.errors`` holds the base class and what all of them share.
"""

from __future__ import annotations

from varaverk import exitcodes
from varaverk.errors import VaraverkError


class IndexStoreError(VaraverkError):
    """Base of the index errors (not the builtin ``IndexError``)."""

    kind = "index"


class IndexMissing(IndexStoreError):
    """No index exists at the path yet: run ``ai-index``."""

    exit_code = exitcodes.NO_INDEX
    kind = "no_index"
    fix = "run ai-index"


class IndexMismatch(IndexStoreError):
    """The index was built with another embedding backend, model or dimension than the
    settings name (or than the vectors being written), so its similarities would mean nothing."""

    exit_code = exitcodes.MISMATCH
    kind = "mismatch"
    fix = "run ai-index --force to rebuild"


class IndexCorrupt(IndexStoreError):
    """The file is not a Varaverk index, or was written by a newer version."""

    exit_code = exitcodes.NO_INDEX
    kind = "corrupt"
    fix = "move the file away and run ai-index to build a new one"


class IndexDamaged(IndexCorrupt):
    """The file is a SQLite database whose pages are damaged (``PRAGMA quick_check`` found it
    so, after a read failed): nothing in it can be trusted."""

    kind = "damaged"
    fix = "run ai-index --force: it moves the damaged file aside, never deleting it, and rebuilds"
