"""A content-hash cache of embeddings, so that measuring a chunker change re-embeds only the
chunks whose text changed.

``CachingEmbedder(embedder, path)`` wraps any ``varaverk.embedding.Embedder``: a text whose
vector is in the cache (keyed by SHA-256 of backend, model and the text itself) is not sent to
the embedder again, in this run or a later one. The cache is one SQLite file (table
``vectors(key BLOB PRIMARY KEY, vec BLOB)``, little-endian float32); ``ai-eval`` keeps it in
its data folder. Only successful vectors are stored; failures pass through unchanged.

It is for evaluation and benchmarks, where the same corpora are embedded again and again; the
index itself already skips unchanged chunks.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Sequence

import numpy as np

from varaverk.embedding import EmbeddingError, EmbedResult

STORE_EVERY = 256  # texts embedded between two writes to the cache file


class CachingEmbedder:
    """An embedder that looks vectors up by content hash before asking ``inner``.

    Args:
        inner: the real embedder (backend, model, max_tokens, count_tokens, embed, ...).
        path: the SQLite cache file (created with its folder when missing).

    Attributes ``backend``, ``model``, ``max_tokens``, ``batch_size`` and ``count_tokens`` are
    the inner embedder's, so an index built through the cache records the real model.
    ``hits`` and ``misses`` count texts served from the cache and embedded.
    """

    def __init__(self, inner, path: str | Path) -> None:
        self.inner = inner
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vec BLOB)")
        self._db.commit()
        self._prefix = f"{inner.backend}\0{inner.model}\0".encode()
        self.hits = 0
        self.misses = 0

    def __getattr__(self, name):
        # backend, model, max_tokens, batch_size, count_tokens, dimension: the inner embedder's
        return getattr(self.inner, name)

    def _key(self, text: str) -> bytes:
        return hashlib.sha256(self._prefix + text.encode("utf-8", "surrogatepass")).digest()

    def embed(self, texts: Sequence[str]) -> EmbedResult:
        """As ``Embedder.embed``: one vector (float32, unit length) or a failure per text."""
        texts = list(texts)
        keys = [self._key(t) for t in texts]
        found = self._lookup(set(keys))
        result = EmbedResult(vectors=[None] * len(texts))
        todo = []
        for i, key in enumerate(keys):
            if key in found:
                result.vectors[i] = found[key]
            else:
                todo.append(i)
        self.hits += len(texts) - len(todo)
        self.misses += len(todo)
        # Stored step by step, so an interrupted run keeps what it already paid for.
        for start in range(0, len(todo), STORE_EVERY):
            step = todo[start:start + STORE_EVERY]
            fresh = self.inner.embed([texts[i] for i in step])
            rows = []
            for j, i in enumerate(step):
                vec = fresh.vectors[j]
                result.vectors[i] = vec
                if vec is None:
                    result.errors[i] = fresh.errors[j]
                else:
                    rows.append((keys[i], np.asarray(vec, dtype="<f4").tobytes()))
            with self._db:
                self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)
        return result

    def _lookup(self, keys: set[bytes]) -> dict[bytes, np.ndarray]:
        out: dict[bytes, np.ndarray] = {}
        batch = list(keys)
        for start in range(0, len(batch), 500):
            part = batch[start:start + 500]
            marks = ",".join("?" * len(part))
            for key, blob in self._db.execute(
                    f"SELECT key, vec FROM vectors WHERE key IN ({marks})", part):
                out[key] = np.frombuffer(blob, dtype="<f4").astype(np.float32)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """One float32 (dimension,) unit vector; raises EmbeddingError as the inner one does."""
        result = self.embed([text])
        if result.vectors[0] is None:
            raise EmbeddingError(f"{self.inner.backend} embedder ({self.inner.model}): "
                                 f"{result.errors[0].message}")
        return result.vectors[0]

    @property
    def dimension(self) -> int:
        """The inner embedder's vector length."""
        return self.inner.dimension

    def close(self) -> None:
        """Close the cache file and the inner embedder."""
        self._db.close()
        self.inner.close()

    def __enter__(self) -> "CachingEmbedder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
