"""What a chat stream yields, whichever the protocol: ``StreamEvent``s, a ``Completion`` at the
end, and the two generation errors.

Unknown counts stay unknown: a count the server did not report is None, never 0, and a speed
that cannot be computed is None, never a division by zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from varaverk import exitcodes
from varaverk.errors import VaraverkError

TRUNCATING_REASONS = frozenset({"length", "max_tokens"})


class GenerationError(VaraverkError):
    """Generation failed (HTTP error, error line, broken stream); the message says where and why."""

    kind = "generation"


class GenerationUnavailable(GenerationError):
    """No model server could be reached; raised before anything was streamed."""

    exit_code = exitcodes.UNAVAILABLE
    kind = "unavailable"


@dataclass
class Completion:
    """One finished model turn.

    Attributes:
        answer: the answer text, reasoning removed, stripped ("" when the model gave none).
        thinking: all reasoning text (native thinking field and ``<think>`` blocks), stripped.
        prompt_tokens: prompt tokens as the server counted them; None when it did not say.
        completion_tokens: generated tokens (thinking included, as servers count); None if unknown.
        tok_s: generation speed in tokens per second; None when unknown.
        truncated: the turn stopped early (done_reason "length", or a ``<think>`` left unclosed).
        prompt_cut: the server evaluated far fewer prompt tokens than the prompt holds (it cut
            the prompt to its context window, so the model never saw part of it).
        done_reason: the server's stop reason ("stop", "length", ...) or None.
        created_at: the server's timestamp of the final message (UTC) or None.
        first_token_s: seconds from sending the request to the first delta (None if none came).
        elapsed_s: seconds from sending the request to the end of the stream.
        backend: "ollama" | "openai"; model: the model name asked for; host: the base URL used.
    """

    answer: str = ""
    thinking: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tok_s: float | None = None
    truncated: bool = False
    prompt_cut: bool = False
    done_reason: str | None = None
    created_at: datetime | None = None
    first_token_s: float | None = None
    elapsed_s: float = 0.0
    backend: str = ""
    model: str = ""
    host: str = ""


@dataclass
class StreamEvent:
    """One event of a stream: type "content" | "thinking" (``text`` is the delta) | "done".

    ``completion`` is set on the "done" event only. ``reclassified`` marks a "thinking" event
    carrying text that was already streamed as "content" (see the module docstring).
    """

    type: str
    text: str = ""
    completion: Completion | None = None
    reclassified: bool = False
