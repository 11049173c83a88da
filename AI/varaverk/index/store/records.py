"""The rows an index run reads and writes: ``FileState`` (a stored file as change detection
sees it), ``FileRow`` (a ``files`` row to write) and ``IndexChanges`` (everything one run
writes, in one transaction). Columns and units: ``varaverk.index.store.schema``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # pragma: no cover
    from varaverk.documents.chunks import Chunk


class FileState(NamedTuple):
    """A stored file row as change detection reads it (see ``FileRow``)."""

    size: int
    mtime_ns: int
    sha256: str
    status: str
    reason: str
    kind: str
    chunk_count: int
    encoding: str
    ctime_ns: int = -1
    inode: int = -1
    device: int = -1

    def stat_key(self) -> tuple[int, int, int, int, int]:
        """``(size, mtime_ns, ctime_ns, inode, device)`` as stored (``stat_key``)."""
        return (self.size, self.mtime_ns, self.ctime_ns, self.inode, self.device)


def stat_key(st) -> tuple[int, int, int, int, int]:
    """``(size, mtime_ns, ctime_ns, inode, device)`` of an ``os.stat_result``: what change
    detection compares, as git does (ctime cannot be set back by any user tool, and a file
    replaced by a rename or a restore has another inode)."""
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


UNKNOWN_STAT = (-1, -1, -1, -1, -1)


class FileRow(NamedTuple):
    """One ``files`` row: a tracked path's state after a run (``size`` bytes, ``mtime_ns``
    and ``ctime_ns`` ns, ``inode`` and ``device``, -1 when not known; ``status``
    ``indexed``, ``skipped`` or ``partial``)."""

    path: str
    kind: str
    size: int
    mtime_ns: int
    sha256: str
    status: str
    reason: str = ""
    chunk_count: int = 0
    encoding: str = ""
    source: str = "repo"
    ctime_ns: int = -1
    inode: int = -1
    device: int = -1


def file_row(path: str, kind: str, key: tuple[int, int, int, int, int], sha256: str,
             status: str, reason: str = "", chunk_count: int = 0, encoding: str = "",
             source: str = "repo") -> FileRow:
    """A ``FileRow`` whose stat fields are ``key`` (``stat_key``, or ``UNKNOWN_STAT``)."""
    size, mtime_ns, ctime_ns, inode, device = key
    return FileRow(path, kind, size, mtime_ns, sha256, status, reason, chunk_count, encoding,
                   source, ctime_ns, inode, device)


class IndexChanges:
    """Everything one index run writes, applied by ``Index.write`` in one transaction.

    Attributes:
        replace_all: drop every file and chunk first (``--force``).
        delete_paths: paths whose file row and chunks go (deleted or renamed away).
        replace_chunks_of: paths whose chunks are dropped before ``new_chunks`` are added.
        new_chunks: ``(chunk, vector)`` pairs; vectors float32 ``(dim,)`` L2-normalised.
        file_rows: file rows to insert or replace.
        embedder: ``(backend, model, dimension)`` that made ``new_chunks``; None when nothing
            was embedded by this run.
        configured: ``(AI_EMBED_BACKEND, AI_EMBED_MODEL)`` as the settings of this run name
            them, recorded for ``names_other_embedder``; None keeps the recorded ones.
        meta: other meta entries to set (head, built_at, build_seconds, repo_root, ...).

    A plain class, not a dataclass: the no-op refresh imports this module, and
    ``dataclasses`` costs that run more than its own work (it imports ``inspect``).
    """

    def __init__(self, replace_all: bool = False, delete_paths: list[str] | None = None,
                 replace_chunks_of: list[str] | None = None,
                 new_chunks: list[tuple[Chunk, Any]] | None = None,
                 file_rows: list[FileRow] | None = None,
                 embedder: tuple[str, str, int | None] | None = None,
                 configured: tuple[str, str] | None = None,
                 meta: dict[str, str] | None = None):
        self.replace_all = replace_all
        self.delete_paths = delete_paths if delete_paths is not None else []
        self.replace_chunks_of = replace_chunks_of if replace_chunks_of is not None else []
        self.new_chunks = new_chunks if new_chunks is not None else []
        self.file_rows = file_rows if file_rows is not None else []
        self.embedder = embedder
        self.configured = configured
        self.meta = meta if meta is not None else {}
