"""Past conversations for memory from the chat-export JSON the index already reads
(``varaverk.documents.chat_exports``): a list of ``{"chat", "sender", "timestamp", "text"}``
objects, plus an optional ``"id"`` per message (the turn's id, kept as ``turn_ref``).

Each chat becomes one conversation, its messages in timestamp order (stable for equal
times). A sender named like an assistant (``ASSISTANT_NAMES``) speaks as ``assistant``,
everyone else as ``user``. Media placeholders and messages without text or a valid ISO 8601
timestamp are skipped and counted.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field

from varaverk.documents.chat_exports import MAX_JSON_DEPTH, MEDIA, check_json_depth

ASSISTANT_NAMES = frozenset({"assistant", "ai", "bot", "varaverk", "model"})


@dataclass
class ImportedChats:
    """``conversations``: chat name → turn dicts for ``HostMemory.remember``, in order;
    ``skipped``: messages left out (no text, a placeholder, a bad timestamp)."""

    conversations: dict[str, list[dict]] = field(default_factory=dict)
    skipped: int = 0


def _text(item: dict, key: str) -> str:
    value = item.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value if isinstance(value, str) else ""


def _when(raw: str) -> str | None:
    try:
        when = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when.replace(tzinfo=None).isoformat(timespec="seconds")


def parse_chat_export(text: str) -> ImportedChats:
    """The conversations of a chat-export JSON ``text``.

    Raises ValueError when it is not JSON, not a list, or nested deeper than the index allows.
    """
    check_json_depth(text, MAX_JSON_DEPTH)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(data, list):
        raise ValueError("a chat export is a JSON list of {chat, sender, timestamp, text}")
    out = ImportedChats()
    staged: dict[str, list[tuple[str, int, dict]]] = {}
    for i, item in enumerate(data):
        body = _text(item, "text").strip() if isinstance(item, dict) else ""
        when = _when(_text(item, "timestamp")) if body else None
        if not body or MEDIA.match(body) or when is None:
            out.skipped += 1
            continue
        sender = _text(item, "sender").strip() or "user"
        role = "assistant" if sender.lower() in ASSISTANT_NAMES else "user"
        turn = {"speaker": sender, "role": role, "said_at": when, "text": body}
        if _text(item, "id").strip():
            turn["turn_ref"] = _text(item, "id").strip()
        staged.setdefault(_text(item, "chat").strip() or "chat", []).append((when, i, turn))
    for chat, turns in staged.items():
        out.conversations[chat] = [t for _, _, t in sorted(turns, key=lambda x: x[:2])]
    return out
