"""The ai-index engine: ``refresh`` (with ``plan`` and ``status``) lists and classifies tracked
paths (``classify``), finds what changed (``change_detection``), prepares documents
(``prepare``, ``secret_masks``), embeds them in batches (``batched_embedding``) and writes the
index file (``store``) in one transaction."""
