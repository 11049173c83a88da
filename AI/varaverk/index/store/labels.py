"""The label field stored at write time: each chunk's label tokens (``chunks.label``) and the
FTS5 table over them (``labels_fts``) whose statistics the label BM25 reads
(``varaverk.retrieval.lexical.StoredLabelBm25``).

A chunk's label is its file's name without folders and extensions, its section (heading
trail) and its title; stored as its tokens (``varaverk.text.label_tokens``: runs of
``[a-z0-9]``, lower case) with ``varaverk.text.STOPWORDS`` removed, joined by single spaces.
Since every stored token is a run of ASCII letters and digits, FTS5's tokenizer splits the
stored text into exactly these tokens: ``labels_fts``'s document sizes are the labels' token
counts and its postings each token's occurrences, so opening an index reads those instead of
tokenizing every label in Python.

Every function taking a connection runs under the caller's lock (``Index``); numpy and the
question words' patterns (``varaverk.text``) are imported inside the functions that need them
(the no-op refresh opens the index too).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING


if TYPE_CHECKING:  # pragma: no cover
    import numpy as np


def file_stem(path: str) -> str:
    """A file's name without folders and extensions: ``docs/turn-howto.md`` -> ``turn-howto``."""
    name = path.rsplit("/", 1)[-1]
    return name.split(".", 1)[0] if not name.startswith(".") else name


def label_text(path: str, section: str, title: str) -> str:
    """The label of a chunk as one text: file stem, section and title, space-separated."""
    return f"{file_stem(path)} {section} {title}"


def chunk_label(path: str, section: str, title: str) -> str:
    """The ``chunks.label`` value of a chunk: its label's tokens, stop words removed, joined
    by spaces (``""`` when none is left)."""
    from varaverk.text import STOPWORDS, label_tokens
    return " ".join(t for t in label_tokens(label_text(path, section, title))
                    if t not in STOPWORDS)


def backfill(conn: sqlite3.Connection) -> None:
    """Fill ``chunks.label`` for every stored chunk and rebuild ``labels_fts`` from it (the
    step of the migration that adds them: their values need Python's tokenizer)."""
    rows = conn.execute("SELECT id, path, section, title FROM chunks").fetchall()
    conn.executemany("UPDATE chunks SET label = ? WHERE id = ?",
                     [(chunk_label(path, section, title), cid)
                      for cid, path, section, title in rows])
    conn.execute("INSERT INTO labels_fts(labels_fts) VALUES ('rebuild')")


def lengths(conn: sqlite3.Connection) -> tuple["np.ndarray", "np.ndarray"]:
    """``(chunk ids int64, label token counts int64)`` in id order, from ``labels_fts``'s
    document sizes."""
    from varaverk.index.store.fts import doc_lengths
    return doc_lengths(conn, "labels_fts")


def postings(conn: sqlite3.Connection, token: str) -> "np.ndarray":
    """int64: the chunk id of every occurrence of one label token, in chunk id order (one
    entry per occurrence: a token twice in a label gives its id twice)."""
    from varaverk.index.store.fts import create_instance_table, postings as fts_postings
    create_instance_table(conn, "labels_fts")
    return fts_postings(conn, token, table="labels_fts")[0]
