"""Document summaries: the extractive summary (no model), the model summary with its refine pass
over a long file's chunks, and the ``ai-index --summaries`` pass that stores them by content
hash (``varaverk.index.store.summaries``).

This package's ``__init__`` imports nothing: the index imports ``extractive`` (contextual
chunks) and must not pull in ``refine``, which imports the generation client (answering).
"""
