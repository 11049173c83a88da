"""``HostMemory``: this host's long-term memory, what the answer pipeline, the dock and
``ai-memory`` use. It ties the store, the digest, the embedder and recall together:

* ``remember``: turns are redacted (the capabilities' rules: the host's known secret values,
  then every secret shape, ``varaverk.masking.scrubbing.scrub``) and only then stored;
* ``digest_pending``: every triplet not yet digested, each written in one transaction;
  with ``AI_MEMORY_DIGEST=model`` a failed or malformed model digest stores the extractive
  digest with status ``retry`` (at most ``MAX_ATTEMPTS`` model attempts in all);
* ``recall`` and ``block``: what a question brings back, and its prompt block.

Vectors come from the index's embedder (``varaverk.embedding.make_embedder``), and a memory
embedded by another refuses to mix (``MemoryMismatch``).
"""

from __future__ import annotations

import logging
import re
from typing import Callable

from varaverk.errors import VaraverkError
from varaverk.host_secrets import known_secrets
from varaverk.masking.scrubbing import scrub
from varaverk.memory.digest import Digest, DigestInvalid, extractive_digest, model_digest
from varaverk.memory.prompt_block import memory_block
from varaverk.memory.recall import Recalled, recall
from varaverk.memory.store import MemoryStore
from varaverk.memory.triplets import Turn

log = logging.getLogger("varaverk.memory")

MAX_ATTEMPTS = 3  # model digests of one triplet before its extractive digest is final
# A secret told in prose ("the admin password is X", "my PIN was 1234"): documents write
# secrets as key/value pairs, which the shared rules mask; people say them in sentences.
SPOKEN_SECRET = re.compile(
    r"(?i)\b((?:password|passphrase|passwd|pass ?code|pin|token|secret|api[ _-]?key|"
    r"private key)s?\s+(?:is|was|are|=|:|to)\s+)(?!\[redacted\])[\"'`]?([^\s\"'`\\]+)")


class HostMemory:
    """The memory file of ``settings`` (``Settings.memory_path``) with its embedder.

    ``embedder`` and ``chat_client`` default to those the settings name, made on first need.
    """

    def __init__(self, settings, embedder=None, chat_client=None, store=None) -> None:
        self.settings = settings
        self.store = store or MemoryStore.open(settings.memory_path)
        self._embedder = embedder
        self._client = chat_client
        self._secrets = known_secrets(settings)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> "HostMemory":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def embedder(self):
        if self._embedder is None:
            from varaverk.embedding import make_embedder  # numpy, onnxruntime: on need
            self._embedder = make_embedder(self.settings)
        return self._embedder

    def redact(self, text: str) -> str:
        """``text`` with this host's secrets, every secret shape and secrets told in
        prose (``SPOKEN_SECRET``) replaced by ``[redacted]``."""
        text = scrub(text, self._secrets)
        return SPOKEN_SECRET.sub(lambda m: m.group(1) + "[redacted]", text)

    def remember(self, conversation: str, turns: list[dict]) -> list[Turn]:
        """Store ``turns`` (``speaker``, ``role``, ``said_at``, ``text``, optional
        ``turn_ref``) of ``conversation``, redacted, in one transaction; returns those added."""
        clean = [{**t, "text": self.redact(t["text"])} for t in turns]
        return self.store.add_turns(conversation, clean)

    # -- digesting ----------------------------------------------------------------------------

    def _chat_client(self):
        if self._client is None:
            from varaverk.answering.generation.chat_client import make_chat_client
            from varaverk.ledger.recording import recording_work
            model = self.settings.ai_memory_model.strip() or self.settings.ai_gen_model
            self._client = recording_work(
                make_chat_client(self.settings.replace(ai_gen_model=model)), self.settings,
                "memory", "digest")
        return self._client

    def _digest(self, turns: list[Turn]) -> tuple[Digest, str, str]:
        """``(digest, status, error)``: the model's when it succeeds, else the extractive
        one with status ``retry`` and the reason."""
        if self.settings.ai_memory_digest == "extractive":
            return extractive_digest(turns), "digested", ""
        try:
            digest = model_digest(turns, self._chat_client())
        except (DigestInvalid, VaraverkError) as exc:
            log.info("model digest failed (%s); the extractive digest stands in", exc)
            return extractive_digest(turns), "retry", str(exc)[:500]
        # The model may repeat what it read: its output is redacted like the turns were.
        digest.facts = [type(f)(self.redact(f.statement), f.speaker, f.type)
                        for f in digest.facts]
        digest.recollection = self.redact(digest.recollection)
        return digest, "digested", ""

    def _store_digest(self, conversation: str, first: int, last: int, attempts: int) -> None:
        turns = self.store.turns(conversation, first, last)
        if not turns:
            return
        digest, status, error = self._digest(turns)
        attempts += self.settings.ai_memory_digest == "model"
        if status == "retry" and attempts >= MAX_ATTEMPTS:
            status = "digested"  # the extractive digest is final
        result = self.embedder.embed([f.statement for f in digest.facts])
        kept = [(f, v) for f, v in zip(digest.facts, result.vectors) if v is not None]
        if not kept:
            failure = next(iter(result.errors.values()), None)
            raise VaraverkError(f"no fact of {conversation} turns {first}-{last} got a vector: "
                                f"{failure.message if failure else 'nothing to embed'}")
        import numpy as np

        digest.facts = [f for f, _ in kept]
        vectors = np.vstack([v for _, v in kept])
        embedder = (self.embedder.backend, self.embedder.model, int(vectors.shape[1]))
        self.store.write_digest(conversation, first, last, digest, vectors, embedder, status,
                                error, attempts)

    def digest_pending(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Digest every triplet without a digest, then retry failed model digests.
        ``progress(done, total)`` after each. Returns the number of triplets written."""
        todo = [(c, f, la, 0) for c, f, la in self.store.pending()]
        todo += [(t.conversation, t.first_seq, t.last_seq, t.attempts)
                 for t in self.store.triplets(status="retry")]
        self.store.check_embedder(self.embedder.backend, self.embedder.model)
        for done, (conversation, first, last, attempts) in enumerate(todo, 1):
            self._store_digest(conversation, first, last, attempts)
            if progress:
                progress(done, len(todo))
        return len(todo)

    # -- recalling ----------------------------------------------------------------------------

    def recall(self, question: str, conversation: str | None = None,
               recent: list[Turn] = ()) -> list[Recalled]:
        """The triplets ``question`` brings back, hot first (``varaverk.memory.recall``);
        ``conversation`` (the current one) never recalls itself."""
        return recall(self.store, self.embedder, self.redact(question), list(recent),
                      exclude=conversation)

    def block(self, recalled: list[Recalled]) -> tuple[str, list[Recalled]]:
        """The prompt block for ``recalled`` within ``AI_MEMORY_BUDGET`` tokens (redacted
        again with today's secrets), and the triplets it holds."""
        text, used = memory_block(recalled, self.settings.ai_memory_budget)
        return self.redact(text), used
