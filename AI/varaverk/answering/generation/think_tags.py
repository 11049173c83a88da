"""Reasoning never leaks into the answer: ``<think>`` blocks split off streamed content.

``ThinkSplitter`` handles tags cut across deltas, a missing opening tag and a block left
unclosed. A note for consumers that show content live: when a lone ``</think>`` arrives (a model
whose chat template opened the block in the prompt), the text streamed before it as "content"
turns out to be reasoning. The splitter then gives it back as "reclassified", which the clients
stream as a "thinking" event with ``StreamEvent.reclassified`` True; re-render from the "done"
event's ``completion.answer``, which is always right.
"""

from __future__ import annotations

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"


def _partial_tag_suffix(text: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of a think tag."""
    for n in range(min(len(text), len(CLOSE_TAG) - 1), 0, -1):
        tail = text[-n:]
        if OPEN_TAG.startswith(tail) or CLOSE_TAG.startswith(tail):
            return n
    return 0


class ThinkSplitter:
    """Separates ``<think>...</think>`` reasoning from the answer in streamed content.

    Feed content deltas with ``feed``; it returns (kind, text) pieces to stream, kind
    "content" | "thinking" | "reclassified" (text first streamed as content that a lone
    ``</think>`` showed to be reasoning). Call ``finish`` at the end. ``answer`` and ``thinking``
    then hold the stripped totals; ``unclosed`` tells whether a block was still open.

    Rules: a tag may be cut anywhere across deltas (a possible partial tag is held back until the
    next delta decides it); ``</think>`` without an opening tag makes everything before it
    reasoning (chat templates that open the block in the prompt); an unclosed block at the end
    stays reasoning, never answer.
    """

    def __init__(self) -> None:
        self._pending = ""            # held back: may be the start of a tag
        self._in_think = False
        self._seen_tag = False        # any tag seen; a lone </think> only counts before that
        self._answer: list[str] = []
        self._thinking: list[str] = []
        self._answer_started = False  # leading whitespace of the answer is dropped

    @property
    def unclosed(self) -> bool:
        """True when a ``<think>`` block was still open at the end (its text stays reasoning)."""
        return self._in_think

    @property
    def answer(self) -> str:
        """All content streamed as answer so far, outside think blocks, stripped."""
        return "".join(self._answer).strip()

    @property
    def thinking(self) -> str:
        """All reasoning so far (think blocks, and text before a lone ``</think>``), stripped."""
        return "".join(self._thinking).strip()

    def _emit(self, kind: str, text: str, out: list[tuple[str, str]]) -> None:
        if not text:
            return
        if kind == "content":
            if not self._answer_started:
                text = text.lstrip()
                if not text:
                    return
                self._answer_started = True
            self._answer.append(text)
        else:
            self._thinking.append(text)
        out.append((kind, text))

    def _process(self, text: str, out: list[tuple[str, str]]) -> None:
        while text:
            if self._in_think:
                end = text.find(CLOSE_TAG)
                if end < 0:
                    self._emit("thinking", text, out)
                    return
                self._emit("thinking", text[:end], out)
                self._in_think = False
                text = text[end + len(CLOSE_TAG):]
                continue
            start, end = text.find(OPEN_TAG), text.find(CLOSE_TAG)
            if end >= 0 and (start < 0 or end < start):
                before = text[:end]
                if not self._seen_tag:
                    # a lone </think>: what came before it was reasoning after all
                    earlier = "".join(self._answer)
                    self._answer.clear()
                    self._answer_started = False
                    if earlier:
                        self._thinking.append(earlier)
                        out.append(("reclassified", earlier))
                    self._emit("thinking", before, out)
                else:
                    self._emit("content", before, out)
                self._seen_tag = True
                text = text[end + len(CLOSE_TAG):]
                continue
            if start >= 0:
                self._emit("content", text[:start], out)
                self._in_think = True
                self._seen_tag = True
                text = text[start + len(OPEN_TAG):]
                continue
            self._emit("content", text, out)
            return

    def feed(self, delta: str) -> list[tuple[str, str]]:
        """Split one content delta; returns the pieces that can be streamed now."""
        out: list[tuple[str, str]] = []
        text = self._pending + delta
        hold = _partial_tag_suffix(text)
        self._pending = text[len(text) - hold:] if hold else ""
        self._process(text[:len(text) - hold] if hold else text, out)
        return out

    def finish(self) -> list[tuple[str, str]]:
        """Flush a held-back partial tag (it was literal text after all)."""
        out: list[tuple[str, str]] = []
        text, self._pending = self._pending, ""
        self._process(text, out)
        return out
