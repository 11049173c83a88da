"""Counting the tokens of model turns made on the way to an answer, or in the background.

An answer may cost more than its own completion: the follow-up rewrite and the summaries made
for the question (``AI_SUMMARIES=query``) are turns of their own. ``TokenTally`` adds up those
turns' counts so the answer's one ledger row carries the whole ask (``with_work``). Work that
answers no ask (``ai-index --summaries``, memory digests) writes rows of its own through
``recorder``, under a profile naming the work.

``RecordingChatClient`` wraps any chat client (``.stream(messages, **kw)`` yielding events
whose last, ``done``, carries a ``completion`` with ``prompt_tokens``, ``completion_tokens``
and ``tok_s``) and hands each completion to a callback. A count a server did not report stays
unknown in every sum: a total with an unknown part is unknown, never a silent undercount.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple

from varaverk.ledger.rows import row_from_completion
from varaverk.ledger.storage import append_row

log = logging.getLogger(__name__)

OnCompletion = Callable[[Any], None]


class Counts(NamedTuple):
    """Token counts; None is unknown."""

    prompt_tokens: int | None
    completion_tokens: int | None
    tok_s: float | None = None


def _plus(a: int | None, b: Any) -> int | None:
    return None if a is None or not isinstance(b, int) else a + b


class TokenTally:
    """Token counts of completions added up (thread-safe: summaries run in threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.turns = 0
        self._prompt: int | None = 0
        self._completion: int | None = 0

    def add(self, completion: Any) -> None:
        """Count one completion (missing counts make the sums unknown)."""
        with self._lock:
            self.turns += 1
            self._prompt = _plus(self._prompt, getattr(completion, "prompt_tokens", None))
            self._completion = _plus(self._completion,
                                     getattr(completion, "completion_tokens", None))

    def with_work(self, completion: Any) -> Counts:
        """``completion``'s counts plus those counted here; its own speed (``tok_s``)."""
        with self._lock:
            prompt, done = self._prompt, self._completion
        return Counts(_plus(prompt, getattr(completion, "prompt_tokens", None)),
                      _plus(done, getattr(completion, "completion_tokens", None)),
                      getattr(completion, "tok_s", None))


class RecordingChatClient:
    """``inner`` whose every finished turn is also handed to ``on_completion``."""

    def __init__(self, inner: Any, on_completion: OnCompletion) -> None:
        self.inner = inner
        self.on_completion = on_completion

    def __getattr__(self, name: str) -> Any:  # model, backend ... of the wrapped client
        return getattr(self.inner, name)

    def stream(self, messages: list[dict[str, str]], **kwargs: Any) -> Iterator[Any]:
        """The wrapped client's events, unchanged; a ``done`` completion is counted first."""
        events = self.inner.stream(messages, **kwargs)
        try:
            for event in events:
                if event.type == "done" and event.completion is not None:
                    self.on_completion(event.completion)
                yield event
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()


def recorder(ledger_path: str | Path, host: str, profile: str, source: str,
             retain_rows: int | None = None) -> OnCompletion:
    """A callback appending one ledger row per completion; a row that cannot be written is a
    warning, never a failure of the work that made it."""
    def record(completion: Any) -> None:
        try:
            row = row_from_completion(completion, host, profile, source)
            append_row(ledger_path, row, retain_rows=retain_rows)
        except Exception as exc:
            log.warning("ledger row not written to %s: %s", ledger_path, exc)
    return record


def recording_work(inner: Any, settings: Any, profile: str, source: str) -> RecordingChatClient:
    """``inner`` writing one row per completion to this host's ledger
    (``settings.token_db_path``, pruned like the dock's) for work that answers no ask:
    ``profile`` names the work (``summary``, ``memory``), ``source`` what ran it."""
    return RecordingChatClient(inner, recorder(settings.token_db_path, settings.ai_host_name,
                                               profile, source,
                                               retain_rows=settings.ai_token_retain_rows))
