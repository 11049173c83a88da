"""The full-text side of the index: FTS5 search, postings and document lengths, read from the
``chunks_fts`` table (``varaverk.index.store.schema``), and the merge that keeps it in few
segments.

Every function takes the index's open connection and runs under the caller's lock
(``Index``). Postings and lengths come back from SQLite as one comma-joined string (or one
concatenated BLOB) and are parsed by numpy: far cheaper than a Python row per occurrence on a
large index. numpy is imported only inside these functions (the no-op refresh opens the
index too).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

# A write merges the full-text index into one segment while it holds at most this many pages
# (about 4 KB each; some 12k short chunks): merging rewrites the whole index, so a larger one
# keeps FTS5's own incremental merging and a write costs what the changed chunks cost.
MAX_MERGED_FTS_PAGES = 1024


def merge(conn: sqlite3.Connection) -> None:
    """Merge ``chunks_fts`` into one segment (FTS5's ``optimize``) when it holds more than one
    and at most ``MAX_MERGED_FTS_PAGES`` pages. Each segment costs a look-up for every token a
    query reads (``postings``, ``search``); the postings and scores stay the same."""
    segments, pages = conn.execute(
        "SELECT count(DISTINCT segid), (SELECT count(*) FROM chunks_fts_data) "
        "FROM chunks_fts_idx").fetchone()
    if segments > 1 and pages <= MAX_MERGED_FTS_PAGES:
        conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('optimize')")


def search(conn: sqlite3.Connection, expr: str, limit: int) -> list[tuple[int, float]]:
    """``[(chunk id, score)]`` for the FTS5 query ``expr``, best first, at most ``limit``.

    The score is BM25 negated (SQLite's bm25 is lower-is-better), so higher is better; a query
    FTS5 cannot parse gives [].
    """
    try:
        rows = conn.execute(
            "SELECT rowid, bm25(chunks_fts, 1.0, 1.0) AS rank FROM chunks_fts "
            "WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?", (expr, int(limit))).fetchall()
    except sqlite3.OperationalError:
        return []
    return [(int(r[0]), -float(r[1])) for r in rows]


# Columns of each FTS5 table (``schema``): a docsize row holds one varint per column.
COLUMNS = {"chunks_fts": 2, "labels_fts": 1}


def doc_lengths(conn: sqlite3.Connection,
                table: str = "chunks_fts") -> tuple["np.ndarray", "np.ndarray"]:
    """``(chunk ids int64, lengths int64)`` in id order: the token count of every full-text
    row, all columns together, from FTS5's ``{table}_docsize`` (one varint per column,
    ``COLUMNS``). Raises ValueError on sizes it cannot decode (``varint_values``)."""
    import numpy as np

    # group_concat copies a BLOB's bytes unchanged when the database's text is UTF-8 (half
    # the bytes of hex and no conversion either way); otherwise they go through hex.
    raw = conn.execute("PRAGMA encoding").fetchone()[0].upper() == "UTF-8"
    sizes = ("CAST(group_concat(CAST(sz AS BLOB), '') AS BLOB)" if raw
             else "group_concat(hex(sz), '')")
    ids, blobs = conn.execute(
        f"SELECT group_concat(id), {sizes} "
        f"FROM (SELECT id, sz FROM {table}_docsize ORDER BY id)").fetchone()
    if not ids:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    ids = np.fromstring(ids, dtype=np.int64, sep=",")
    values = varint_values(blobs if raw else bytes.fromhex(blobs))
    if values.size != ids.size * COLUMNS[table]:
        raise ValueError(f"{values.size} FTS5 document sizes for {ids.size} rows of {table}")
    return ids, values.reshape(ids.size, COLUMNS[table]).sum(axis=1)


def varint_values(data: bytes) -> "np.ndarray":
    """int64: the SQLite varints (big-endian, 7 bits a byte, high bit set on all but the
    last) back to back in ``data``. Raises ValueError on a truncated varint or one of 9
    bytes (over 2^56: no count)."""
    import numpy as np

    b = np.frombuffer(data, dtype=np.uint8)
    last = b < 0x80
    if not b.size or not last[-1]:
        raise ValueError("truncated varint in FTS5 document sizes")
    if last.all():   # every count under 128 (the label field's, most text columns'): a byte each
        return b.astype(np.int64)
    ends = np.flatnonzero(last)
    varint = np.cumsum(last) - last             # the varint each byte belongs to
    after = ends[varint] - np.arange(b.size)    # bytes after it in that varint
    if after.max() > 7:
        raise ValueError("9-byte varint in FTS5 document sizes")
    return np.bincount(varint, weights=(b & 0x7F).astype(np.int64) << (7 * after),
                       minlength=ends.size).astype(np.int64)


def varint_row_sums(data: bytes, sizes: "np.ndarray") -> "np.ndarray":
    """Per row, the sum of the SQLite varints (``varint_values``) in ``data``: the rows' blobs
    back to back, ``sizes`` bytes each. int64 (rows,). Raises ValueError as
    ``varint_values`` does."""
    import numpy as np

    values = varint_values(data)
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) < 0x80)
    rows = np.searchsorted(np.cumsum(sizes), ends, side="right")
    return np.bincount(rows, weights=values, minlength=sizes.size).astype(np.int64)


def vocabulary(conn: sqlite3.Connection) -> frozenset[str]:
    """Every token the full-text index holds, from an ``fts5vocab`` row table made in the
    connection's temp schema (so a read-only index works too)."""
    _create_row_table(conn)
    return frozenset(r[0] for r in conn.execute("SELECT term FROM temp.chunks_fts_row"))


def held_tokens(conn: sqlite3.Connection, tokens: list[str]) -> set[str]:
    """Those of ``tokens`` the full-text index holds (``vocabulary`` for a few tokens: a
    look-up each in the ``fts5vocab`` row table, which FTS5 answers from its term index)."""
    _create_row_table(conn)
    return {t for t in tokens if conn.execute(
        "SELECT 1 FROM temp.chunks_fts_row WHERE term = ?", (t,)).fetchone()}


def holds_any_token(conn: sqlite3.Connection) -> bool:
    """Whether the full-text index holds any token (``vocabulary`` is not empty)."""
    _create_row_table(conn)
    return conn.execute("SELECT 1 FROM temp.chunks_fts_row LIMIT 1").fetchone() is not None


def _create_row_table(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_fts_row "
                 "USING fts5vocab(main, chunks_fts, row)")


def create_instance_table(conn: sqlite3.Connection, table: str = "chunks_fts") -> None:
    """Make the ``fts5vocab`` instance table over ``table`` that ``postings`` and
    ``all_postings`` read, in the connection's temp schema (so a read-only index works too)."""
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table}_instance "
                 f"USING fts5vocab(main, {table}, instance)")


def postings(conn: sqlite3.Connection, token: str, positions: bool = False,
             table: str = "chunks_fts") -> tuple["np.ndarray", ...]:
    """Every occurrence of one token in chunk id order: ``(chunk ids,)`` int64, with
    ``positions`` also the column number (0 context, 1 text) and the token offset within that
    column (``chunks_fts`` only). Needs ``create_instance_table`` for ``table``."""
    import numpy as np

    cols = ["group_concat(doc)"]
    if positions:
        cols += ["group_concat(CASE col WHEN 'context' THEN 0 ELSE 1 END)",
                 "group_concat(offset)"]
    row = conn.execute(f"SELECT {', '.join(cols)} FROM temp.{table}_instance "
                       "WHERE term = ?", (token,)).fetchone()
    return tuple(np.fromstring(v, dtype=np.int64, sep=",") if v else
                 np.zeros(0, dtype=np.int64) for v in row)


def all_postings(conn: sqlite3.Connection) -> tuple[list[str], "np.ndarray", "np.ndarray"]:
    """``(tokens, sizes, chunk_ids)``: every token's occurrences in one scan (see
    ``Index.fts_all_postings``). Needs ``create_instance_table``."""
    import numpy as np

    rows = conn.execute("SELECT term, count(*), group_concat(doc) FROM "
                        "temp.chunks_fts_instance GROUP BY term").fetchall()
    sizes = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
    ids = (np.fromstring(",".join([r[2] for r in rows]), dtype=np.int64, sep=",") if rows
           else np.zeros(0, dtype=np.int64))
    return [r[0] for r in rows], sizes, ids
