"""Chat exports (kind ``chat``): WhatsApp text exports and JSON exports, cut into runs.

Formats read:

* WhatsApp's text export, both forms: ``[dd/mm/yyyy, hh:mm:ss] Name: text`` (iOS) and
  ``dd/mm/yyyy, hh:mm - Name: text`` (Android); two-digit years and ``AM``/``PM`` too. A line
  that does not start a message continues the one before (multi-line messages). A line with a
  timestamp but no ``Name:`` is a system line ("Anna created group …", "… added Ben"), as is
  the end-to-end encryption notice; system lines are never chunk text. The chat is named after
  the file (``WhatsApp Chat with Harbor crew.txt`` → ``Harbor crew``) or a "created group"
  line.
* JSON: a list of ``{"chat", "sender", "timestamp", "text"}`` objects (ISO 8601 timestamps);
  one file may hold several chats. Other fields are ignored, and a field that is not a
  string (a list, an object) counts as missing. A file nested deeper than ``MAX_JSON_DEPTH``
  is refused before it is parsed.

Both are read in one pass, in time linear in the file's size.

Media placeholders (``<Media omitted>``, ``image omitted``, ``<attached: …>``, ``… (file
attached)``, "This message was deleted") carry no words and are never embedded: a message that
is only a placeholder is dropped.

Chunks are runs of one chat's messages: a new run starts after a silence longer than
``SILENCE`` and whenever the next message would take the run past the embedder's budget. Each
run's ``section`` is the chat name and its ``title`` the time span
(``2024-03-02 19:04–19:41``), so a citation names the chat and the span; its context trail adds
the participants. Each message is one line of text, ``[2024-03-02 19:04] Anna: text``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from dataclasses import dataclass
from typing import Callable

from varaverk.documents.chunks import Draft, cap_label, without_surrogates
from varaverk.documents.guard import checkpoint

SILENCE = dt.timedelta(hours=3)   # a longer gap between two messages starts a new run
# A chat export is a list of flat objects; anything nested this deep is not one (and would
# make the JSON decoder recurse).
MAX_JSON_DEPTH = 32
# A JSON string (with its escapes) or one bracket: what the depth check reads.
_JSON_STRING_OR_BRACKET = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"|[\[\]{}]')
_LRM = "\u200e\u200f\u202a\u202c\ufeff"
_TIME = r"(?P<time>\d{1,2}[:.]\d{2}(?:[:.]\d{2})?(?:\s?[APap]\.?[Mm]\.?)?)"
_DATE = r"(?P<date>\d{1,2}/\d{1,2}/\d{2,4})"
BRACKETED = re.compile(rf"^\[{_DATE},?\s+{_TIME}\]\s(?P<rest>.*)$")
DASHED = re.compile(rf"^{_DATE},?\s+{_TIME}\s[-\u2013]\s(?P<rest>.*)$")
_SENDER = re.compile(r"^(?P<name>[^:]{1,80}?):\s(?P<text>.*)$", re.DOTALL)
MEDIA = re.compile(
    r"^(?:<media omitted>|<attached: [^>]*>|(?:image|video|audio|sticker|gif|document|"
    r"contact card) omitted|.+\.\w{2,5} \(file attached\)|this message was deleted|"
    r"you deleted this message|null|<this message was edited>)$", re.IGNORECASE)
ENCRYPTION_NOTICE = "messages and calls are end-to-end encrypted"


@dataclass
class Message:
    """One chat message: ``line`` is its first line in the file (1-based)."""

    chat: str
    sender: str
    when: dt.datetime
    text: str
    line: int


def _clean(line: str) -> str:
    return line.strip(_LRM).replace("\u202f", " ")


def _parse_when(date: str, time: str) -> dt.datetime | None:
    day, month, year = (int(p) for p in date.split("/"))
    if year < 100:
        year += 2000
    time = time.replace(".", ":").upper().replace(" ", "")
    meridiem = time[-2:] if time.endswith(("AM", "PM")) else ""
    parts = [int(p) for p in time.rstrip("APM").split(":")]
    hour, minute, second = (parts + [0])[:3]
    if meridiem == "PM" and hour < 12:
        hour += 12
    elif meridiem == "AM" and hour == 12:
        hour = 0
    try:
        return dt.datetime(year, month, day, hour, minute, second)
    except ValueError:
        return None


def chat_name(path: str) -> str:
    """A chat's name from its export's file name (``WhatsApp Chat with X.txt`` → ``X``)."""
    stem = os.path.splitext(os.path.basename(path.split(":", 1)[-1]))[0]
    return re.sub(r"^WhatsApp Chat (?:with|-)\s*", "", stem).strip() or stem


def _is_system(sender: str | None, text: str, chat: str) -> bool:
    """Android writes system lines without a sender; iOS attributes them to the group."""
    return sender is None or sender == chat or text.lower().startswith(ENCRYPTION_NOTICE)


def parse_whatsapp(path: str, text: str) -> list[Message]:
    """The messages of a WhatsApp text export (system lines and media placeholders left out).

    Never raises; lines before the first message are ignored.
    """
    name = chat_name(path)
    raw: list[tuple] = []   # (when, sender or None, [text lines], line)
    for number, line in enumerate(text.split("\n"), start=1):
        checkpoint()
        clean = _clean(line)
        m = BRACKETED.match(clean) or DASHED.match(clean)
        when = _parse_when(m.group("date"), m.group("time")) if m else None
        if when is None:
            if raw:  # a message's next line: joined once the message is complete
                raw[-1][2].append(line.strip(_LRM))
            continue
        said = _SENDER.match(m.group("rest"))
        raw.append((when, said.group("name").strip() if said else None,
                    [said.group("text") if said else m.group("rest")], number))
    out = []
    for when, sender, parts, number in raw:
        body = "\n".join(parts).strip(_LRM + " \n")
        if _is_system(sender, body, name):
            created = re.search(r'created group [“"](.+?)[”"]', body)
            name = cap_label(created.group(1)) if created and name == chat_name(path) else name
            continue
        if not body or MEDIA.match(body.strip(_LRM)):
            continue
        out.append(Message(name, sender or "", when, body, number))
    for message in out:
        message.chat = name
    return out


def parse_json_export(path: str, text: str) -> list[Message]:
    """The messages of a JSON export: a list of ``{chat, sender, timestamp, text}``.

    Raises ValueError when the file is not such a list, is not JSON, or is nested deeper
    than ``MAX_JSON_DEPTH`` (the indexer records the reason).
    """
    check_json_depth(text, MAX_JSON_DEPTH)
    data = json.loads(text)
    if not isinstance(data, list):
        raise ValueError("a chat export is a JSON list of {chat, sender, timestamp, text}")
    lines = _object_lines(text)
    out = []
    for i, item in enumerate(data):
        checkpoint()
        if not isinstance(item, dict):
            continue
        body = _field(item, "text").strip()
        try:
            when = dt.datetime.fromisoformat(_field(item, "timestamp").replace("Z", "+00:00"))
        except ValueError:
            continue
        if not body or MEDIA.match(body):
            continue
        out.append(Message(cap_label(_field(item, "chat")) or chat_name(path),
                           cap_label(_field(item, "sender")),
                           when.replace(tzinfo=None), body,
                           lines[i] if i < len(lines) else 1))
    return out


def _field(item: dict, key: str) -> str:
    """A message's field as text: a string (lone surrogates as U+FFFD), or a number written
    out; anything else ``""``."""
    value = item.get(key)
    if isinstance(value, str):
        return without_surrogates(value)
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else ""


def check_json_depth(text: str, limit: int) -> None:
    """Raise ValueError when JSON ``text`` opens more than ``limit`` nested lists or objects.

    One pass over its brackets outside strings (linear in the text), before any parse, so
    a file nested 100,000 deep costs a scan, not a RecursionError in the decoder.
    """
    depth = 0
    for m in _JSON_STRING_OR_BRACKET.finditer(text):
        bracket = m.group()
        if bracket in ("[", "{"):
            depth += 1
            if depth > limit:
                raise ValueError(f"a chat export, but nested deeper than {limit} levels")
        elif bracket in ("]", "}"):
            depth -= 1


def _object_lines(text: str) -> list[int]:
    """The line of each top-level object's ``"timestamp"`` key, in order (1-based).

    Lines are counted on from the previous key, so the whole file is counted once.
    """
    out, line, pos = [], 1, 0
    for m in re.finditer(r'"timestamp"\s*:', text):
        line += text.count("\n", pos, m.start())
        pos = m.start()
        out.append(line)
    return out


def span(first: dt.datetime, last: dt.datetime) -> str:
    """A run's time span: ``2024-03-02 19:04–19:41``, or two dates when it crosses midnight."""
    start = first.strftime("%Y-%m-%d %H:%M")
    end = last.strftime("%H:%M") if first.date() == last.date() else \
        last.strftime("%Y-%m-%d %H:%M")
    return start if start.endswith(end) and first == last else f"{start}\u2013{end}"


def _line(message: Message) -> str:
    body = message.text.replace("\n", " ")
    return f"[{message.when.strftime('%Y-%m-%d %H:%M')}] {message.sender}: {body}"


def chat_drafts(path: str, text: str, count: Callable[[str], int], max_tokens: int
                ) -> list[Draft]:
    """Runs of messages as drafts (see the module doc); ``[]`` when no message is found.

    Args:
        path: the stored path. text: the decoded export (``.json`` by path: JSON).
        count, max_tokens: the embedder's token counter and budget; a run's context and text
            stay within it (a single message too long for it is split later by the budget).
    """
    messages = parse_json_export(path, text) if path.lower().endswith(".json") \
        else parse_whatsapp(path, text)
    by_chat: dict[str, list[Message]] = {}
    for message in messages:
        by_chat.setdefault(message.chat, []).append(message)
    drafts = []
    for chat, items in by_chat.items():
        items.sort(key=lambda m: (m.when, m.line))
        for run in _runs(path, chat, items, count, max_tokens):
            drafts.append(_draft(chat, run))
    drafts.sort(key=lambda d: d.lines[0][0])
    return drafts


def _runs(path: str, chat: str, items: list[Message], count, max_tokens: int):
    # Room for the context trail (path, chat, span, participants) in every run.
    overhead = count(f"{path} › {chat} › 0000-00-00 00:00–00:00 › ") + 24
    run: list[Message] = []
    used = overhead
    for message in items:
        checkpoint()
        cost = count(_line(message)) + 1
        gap = run and message.when - run[-1].when > SILENCE
        if run and (gap or used + cost > max_tokens):
            yield run
            run, used = [], overhead
        run.append(message)
        used += cost
    if run:
        yield run


def _draft(chat: str, run: list[Message]) -> Draft:
    people = sorted({m.sender for m in run if m.sender})
    when = span(run[0].when, run[-1].when)
    meta = {"chat": chat, "participants": people, "first": run[0].when.isoformat(),
            "last": run[-1].when.isoformat(), "messages": len(run)}
    # Line numbers must rise for the budget's part ranges: messages keep their file order
    # within a run (a JSON file may list them in any order), so use each message's own line
    # only when they rise.
    numbers = [m.line for m in run]
    if numbers != sorted(numbers):
        numbers = list(range(min(numbers), min(numbers) + len(run)))
    return Draft(section=chat, title=when, trail=[chat, when, ", ".join(people)],
                 lines=[(n, _line(m)) for n, m in zip(numbers, run)], meta=meta)
