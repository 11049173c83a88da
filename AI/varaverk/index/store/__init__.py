"""The index file: one SQLite database holding tracked files, chunks, their embeddings and a
full-text index (``schema``), read and written through ``index.Index``."""
