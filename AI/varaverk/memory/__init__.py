"""Long-term memory: what was said in earlier conversations comes back when it matters.

Every turn is kept verbatim (secrets redacted first) and never rewritten; turns are digested
in triplets (three consecutive turns) into facts (short attributed statements, embedded by
the index's embedder) and one recollection each. A new question's facts find their nearest
stored facts, each hit a vote for its triplet; the triplet with most votes is recalled
verbatim and the next few as echoes, quoted as data within ``AI_MEMORY_BUDGET`` tokens.

Modules, each importing only those above it:

* ``triplets``: ``Turn`` and how a conversation is cut into triplets;
* ``schema``: the memory file's tables and migrations;
* ``digest``: facts and recollection of a triplet, by the model (JSON schema) or extractive;
* ``fact_matrix``: the stored fact vectors as one matrix, kept up to date per process;
* ``store``: ``MemoryStore``, the SQLite file (``AI_DATA_DIR/memory.db``);
* ``recall``: votes of the new triplet's facts for stored triplets;
* ``prompt_block``: the recalled triplets as a quoted data block;
* ``chat_import``: past conversations from the chat-export JSON format;
* ``host_memory``: ``HostMemory``, what callers use (remember, digest, recall, block);
* ``evaluation``: evidence recall@k of votes against nearest-neighbour and BM25 baselines.
"""
