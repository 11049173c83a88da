"""Query-focused summaries (``AI_SUMMARIES=query``): in an answer whose results do not all fit
the context, a later document reaches the model as a summary made *for this question* by the
generation model, from the passages of that document that matched the question.

One request per document (``AI_GEN_BACKEND``/``AI_GEN_MODEL``): the system prompt ``SYSTEM``
and the user message ``USER`` carrying the question and the document's matched chunks in
document order, under their heading trails, cut to ``PASSAGE_CHARS`` characters
(``varaverk.summaries.refine.parts``). Bounds per answer: at most ``AI_QUERY_SUMMARY_DOCS``
documents, all of them within ``AI_QUERY_SUMMARY_SECONDS`` of wall time (a request still
running at the deadline is abandoned and told to stop), each summary cut off at
``MAX_SUMMARY_CHARS`` (the stream is closed there, so a runaway model costs no more tokens).

A document whose summary fails, times out, comes back empty or is not asked for (over the
count or the time) goes as its stored summary, or else its extractive summary made on the
spot from its stored chunks (``fallback_summaries``): one summary never fails the answer.

Nothing is cached: a summary made for one question serves only that question, and a cache by
question and content hash would hit only when the very same question is asked again over
unchanged files, while storing questions in the index. The labels and the prompt section are
``varaverk.answering.summary_context``'s.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from varaverk.answering.generation.events import GenerationError, GenerationUnavailable
from varaverk.summaries.extractive import extractive_summary
from varaverk.summaries.refine import parts

log = logging.getLogger("varaverk.answering.query_focused_summary")

PASSAGE_CHARS = 6000
MAX_SUMMARY_CHARS = 800

SYSTEM = ("You summarise one technical document for a question about it. From the passages "
          "given, write plain text, at most four sentences: what the document says that "
          "bears on the question, with the names and values (settings, commands, files) it "
          "gives. Say only what the passages say; if they do not bear on the question, say "
          "briefly what the document covers. No preamble, no lists, no markup.")
USER = ("Question: {question}\n\nPassages of the document {path} that matched this question:"
        "\n\n{passages}\n\nSummarise what this document says for the question.")

ClientFor = Callable[[float], Any]  # seconds -> a ChatClient whose timeout is at most those


@dataclass
class QuestionSummaries:
    """What the query-focused summariser made for one answer.

    Attributes:
        texts: ``path -> summary`` made for the question, in the order asked.
        fell_back: ``[(path, reason)]`` of the documents asked for that got no summary.
        seconds: wall time spent.
    """

    texts: dict[str, str] = field(default_factory=dict)
    fell_back: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0


def messages_for(question: str, path: str, chunks: Sequence[Any]) -> list[dict[str, str]]:
    """The chat messages asking for ``path``'s summary for ``question`` from its matched
    ``chunks`` (in document order; ``ChunkLike``), cut to ``PASSAGE_CHARS``."""
    passages = parts(chunks, PASSAGE_CHARS)[0] if chunks else ""
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": USER.format(question=question.strip(), path=path,
                                                    passages=passages)}]


def matched_chunks(hits: Sequence[Any], path: str) -> list[Any]:
    """The chunks of ``hits`` (``Hit``s, best first) from ``path``, in document order."""
    chunks = [h.chunk for h in hits if h.chunk.path == path]
    return sorted(chunks, key=lambda c: (c.start_line, c.part))


def summarise_for_question(question: str, documents: Sequence[tuple[str, Sequence[Any]]],
                           client_for: ClientFor, *, max_docs: int, seconds: float,
                           clock: Callable[[], float] = time.monotonic) -> QuestionSummaries:
    """Summaries made for ``question`` of the first ``max_docs`` of ``documents``
    (``[(path, matched chunks)]``, rank order), one at a time, all within ``seconds``.

    ``client_for(left)`` gives a chat client whose timeout is at most ``left`` seconds. Never
    raises for a model failure: a failed, timed-out or empty summary is left out and listed
    in ``fell_back``; once no server is reachable the rest are not asked for.
    """
    made = QuestionSummaries()
    started = clock()
    asked = list(documents[:max_docs])
    for i, (path, chunks) in enumerate(asked):
        left = seconds - (clock() - started)
        if left <= 0:
            made.fell_back.append((path, "out of time (AI_QUERY_SUMMARY_SECONDS)"))
            continue
        try:
            text = _bounded_summary(client_for(left), messages_for(question, path, chunks),
                                    left)
        except GenerationUnavailable as exc:
            made.fell_back.extend((p, str(exc)) for p, _ in asked[i:])
            break
        except Exception as exc:  # one summary must never fail the answer
            made.fell_back.append((path, str(exc) or type(exc).__name__))
            continue
        if text:
            made.texts[path] = text
        else:
            made.fell_back.append((path, "the model gave no summary"))
    made.seconds = round(clock() - started, 4)
    for path, reason in made.fell_back:
        log.warning("no summary of %s for this question (%s): its stored summary is used",
                    path, reason)
    return made


def _bounded_summary(client: Any, messages: list[dict[str, str]], seconds: float) -> str:
    """The model's answer to ``messages``, whitespace folded, cut at ``MAX_SUMMARY_CHARS``;
    TimeoutError when it is not complete within ``seconds`` (the request, in its own
    thread, is told to stop and closes its stream at its next event or timeout)."""
    results: queue.Queue = queue.Queue(maxsize=1)
    stop = threading.Event()

    def work() -> None:
        try:
            results.put(("text", _stream_text(client, messages, stop)))
        except Exception as exc:
            results.put(("error", exc))

    threading.Thread(target=work, name="query-focused-summary", daemon=True).start()
    try:
        kind, value = results.get(timeout=seconds)
    except queue.Empty:
        stop.set()
        raise TimeoutError(f"no summary within {seconds:.1f} s") from None
    if kind == "error":
        raise value
    return value


def _stream_text(client: Any, messages: list[dict[str, str]], stop: threading.Event) -> str:
    """The content of one streamed turn (reasoning left out), stopping early, stream closed,
    once it passes ``MAX_SUMMARY_CHARS`` or ``stop`` is set."""
    pieces: list[str] = []
    size = 0
    stream = client.stream(messages)
    try:
        for event in stream:
            if stop.is_set():
                return ""
            if event.type == "done" and event.completion is not None:
                return _clipped(event.completion.answer)
            if event.type == "content":
                pieces.append(event.text)
                size += len(event.text)
                if size > MAX_SUMMARY_CHARS:
                    return _clipped("".join(pieces))
    finally:
        stream.close()
    raise GenerationError("the model stream ended without a result")


def _clipped(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= MAX_SUMMARY_CHARS:
        return text
    cut = text[:MAX_SUMMARY_CHARS - 1]
    return cut[:cut.rfind(" ")].rstrip() + "\u2026" if " " in cut else cut + "\u2026"


def fallback_summaries(index: Any, paths: Sequence[str]) -> dict[str, str]:
    """``path -> text`` for ``paths``: the stored summary when current (any model), else the
    extractive summary of the file's stored chunks (masked as the index holds them)."""
    stored = index.current_summaries(list(paths)) if paths else {}
    out: dict[str, str] = {}
    for path in paths:
        text = stored[path].text if path in stored else \
            extractive_summary(index.chunks_for_path(path))
        if text.strip():
            out[path] = text
    return out
