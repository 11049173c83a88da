"""The dock's conversation store: one JSON file per chat under ``AI_DATA_DIR/ai_chats/``.

A stored chat is replayed into later prompts, so it is untrusted input every time it is read:
each message is re-validated on the way in, from the browser and from disk (role ``user`` or
``assistant``, content a string of at most ``MAX_CONTENT_CHARS``); anything else is rejected
and logged, never passed on. An assistant message also keeps the sources its answer cited, as a
record (``sources``: citation, path, section, title, line range, score, the chunk's text then;
``index_head``: the index's HEAD commit then), re-validated the same way, so a reopened answer
can still be checked; a bad record is dropped on load and the answer kept. What else the turn
showed (reasoning, timings, tokens, escalation, findings) is its ``record``
(``turn_record.validate_record``). Only ``Chat.history()`` (role and content) is ever replayed
into a prompt: sources and records are shown, never sent.
An answer someone stopped part-way is kept as far as it got, marked ``"stopped": true``.

Files are written atomically: a temporary file in the same folder, write, flush,
``os.fsync``, ``os.replace``, then the folder is synced. A process killed at any moment leaves
either the complete old file or the complete new one. A file that cannot be read as a chat
(truncated JSON, zero bytes, NUL bytes) is renamed ``<name>.json.corrupt-<timestamp>`` and
reported once; the list keeps working. File names carry the creating host and a random part
(``2026-11-29T22-40-00-hostA-3f9c1a.json``), so two hosts syncing the folder never rewrite
each other's files. After each save the folder is pruned to ``AI_CHAT_HISTORY_MAX`` chats,
oldest first by creation time.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import secrets as _random
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from filelock import FileLock

from varaverk.atomic_files import write_atomic

from varaverk_dock.security import valid_chat_id
from varaverk_dock.turn_record import InvalidRecord, validate_record

log = logging.getLogger("varaverk.dock.chats")

ROLES = ("user", "assistant")
MAX_CONTENT_CHARS = 32_000   # one message; a longer question or answer is refused
MAX_MESSAGES = 200           # per chat; older turns beyond this are dropped on save
# A chat file past this cannot have been written by the dock (MAX_MESSAGES full messages,
# every character escaped, fit well under it): it is set aside unread.
MAX_FILE_BYTES = 64 << 20
MAX_SOURCES = 50             # per answer; a retrieval keeps far fewer
MAX_LABEL_CHARS = 1000       # a source's citation, path, section or title
MAX_SOURCE_TEXT_CHARS = 20_000  # a source's chunk text (chunks are far smaller)
SOURCE_TEXT_FIELDS = ("citation", "path", "section", "title")
_HEAD = re.compile(r"[0-9a-f]{7,64}")
TITLE_CHARS = 80
FORMAT_VERSION = 1
STALE_TMP_SECONDS = 3600     # a save takes milliseconds: an older temporary file is debris
_TS_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


class InvalidMessage(ValueError):
    """A message that is not ``{"role": "user"|"assistant", "content": str}`` within the cap,
    or whose sources record is malformed."""


class ChatNotFound(KeyError):
    """No stored chat with that id (or the id is malformed)."""


class CorruptChat(ValueError):
    """The chat's file could not be read; it has been set aside (``str`` says where)."""


def _valid_source(raw: object) -> dict:
    if not isinstance(raw, dict):
        raise InvalidMessage(f"a source is a {type(raw).__name__}, not an object")
    out: dict = {}
    for key in SOURCE_TEXT_FIELDS:
        value = raw.get(key)
        if value is not None and (not isinstance(value, str) or len(value) > MAX_LABEL_CHARS
                                  or "\x00" in value):
            raise InvalidMessage(f"source {key} is not a string of at most {MAX_LABEL_CHARS}")
        if value is not None and not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:  # a path git listed in bytes that are not UTF-8
                raise InvalidMessage(f"source {key} is not valid Unicode") from None
        out[key] = value
    if not out["path"]:
        raise InvalidMessage("a source has no path")
    lines = (raw.get("start_line"), raw.get("end_line"))
    if not all(type(n) is int for n in lines) or not 1 <= lines[0] <= lines[1]:
        raise InvalidMessage(f"source line range {lines!r} is not 1 <= start <= end")
    out["start_line"], out["end_line"] = lines
    score = raw.get("score")
    if type(score) not in (int, float) or not math.isfinite(score):
        raise InvalidMessage("source score is not a finite number")
    out["score"] = float(score)
    text = raw.get("text")
    if text is not None:
        if not isinstance(text, str) or len(text) > MAX_SOURCE_TEXT_CHARS or "\x00" in text:
            raise InvalidMessage(f"source text is not a string of at most "
                                 f"{MAX_SOURCE_TEXT_CHARS}")
        out["text"] = text
    return out


def validate_sources(sources: object, index_head: object) -> dict:
    """An answer's sources record, checked and reduced to known fields.

    Args:
        sources: a list of at most MAX_SOURCES objects, each ``{"citation", "path", "section",
            "title", "start_line", "end_line", "score"}`` (citation, section, title may be
            null; lines 1-based, inclusive; score a finite number); extra keys are dropped.
        index_head: the index's HEAD commit when the answer was given (hex), or None.

    Returns:
        ``{"sources": [...], "index_head": str | None}``.

    Raises:
        InvalidMessage: naming the first thing wrong.
    """
    if not isinstance(sources, list) or len(sources) > MAX_SOURCES:
        raise InvalidMessage(f"sources must be a list of at most {MAX_SOURCES}")
    if index_head is not None and not (isinstance(index_head, str)
                                       and _HEAD.fullmatch(index_head)):
        raise InvalidMessage("index_head is not a commit id")
    return {"sources": [_valid_source(s) for s in sources], "index_head": index_head}


def validate_message(raw: object) -> dict:
    """One message, checked and reduced to ``{"role", "content"}``, plus an assistant
    message's ``sources`` and ``index_head`` when it has them (``validate_sources``).

    Args:
        raw: a decoded JSON value from the browser or from a chat file.

    Returns:
        A new dict with the keys ``role`` and ``content`` (and ``sources``, ``index_head``).

    Raises:
        InvalidMessage: not an object, a role other than user/assistant (e.g. an injected
            ``system``), content not a string, content longer than MAX_CONTENT_CHARS, a
            sources record on a user message, or a malformed sources record.
    """
    if not isinstance(raw, dict):
        raise InvalidMessage(f"message is a {type(raw).__name__}, not an object")
    role = raw.get("role")
    if role not in ROLES:
        shown = role if isinstance(role, str) and len(role) <= 40 else type(role).__name__
        raise InvalidMessage(f"role {shown!r} is not allowed (only user or assistant)")
    content = raw.get("content")
    if not isinstance(content, str):
        raise InvalidMessage(f"content is a {type(content).__name__}, not a string")
    if len(content) > MAX_CONTENT_CHARS:
        raise InvalidMessage(f"content of {len(content)} characters exceeds the cap of "
                             f"{MAX_CONTENT_CHARS}")
    if "\x00" in content:
        raise InvalidMessage("content holds a NUL character")
    try:
        content.encode("utf-8")
    except UnicodeEncodeError:  # "\ud800" parses as JSON but can never be saved as UTF-8
        raise InvalidMessage("content holds a lone surrogate (not valid Unicode)") from None
    message = {"role": role, "content": content}
    if raw.get("stopped") is True and role == "assistant":
        message["stopped"] = True  # the answer was stopped part-way (shown, never sent)
    if "sources" in raw or "index_head" in raw:
        if role != "assistant":
            raise InvalidMessage("only an assistant message has sources")
        message.update(validate_sources(raw.get("sources", []), raw.get("index_head")))
    if "record" in raw:
        if role != "assistant":
            raise InvalidMessage("only an assistant message has a record")
        try:
            message["record"] = validate_record(raw["record"])
        except InvalidRecord as exc:
            raise InvalidMessage(f"record: {exc}") from None
    return message


def _without_sources(raw: object) -> dict | None:
    """A message whose only fault is its sources record, without it; None otherwise."""
    if not isinstance(raw, dict):
        return None
    try:
        return validate_message({"role": raw.get("role"), "content": raw.get("content")})
    except InvalidMessage:
        return None


def validate_messages(raw: object) -> list[dict]:
    """Every message of a list from the browser, all-or-nothing.

    Raises InvalidMessage (naming the index of the first bad message) when any message is
    invalid, the value is not a list, or it holds more than MAX_MESSAGES messages.
    """
    if not isinstance(raw, list):
        raise InvalidMessage("messages must be a list")
    if len(raw) > MAX_MESSAGES:
        raise InvalidMessage(f"{len(raw)} messages exceed the cap of {MAX_MESSAGES}")
    out = []
    for i, item in enumerate(raw):
        try:
            out.append(validate_message(item))
        except InvalidMessage as exc:
            raise InvalidMessage(f"message {i}: {exc}") from None
    return out


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def _fmt(ts: datetime) -> str:
    return ts.astimezone(timezone.utc).strftime(_TS_FORMAT)


def _title_of(messages: list[dict[str, str]]) -> str:
    for m in messages:
        if m["role"] == "user":
            text = " ".join(m["content"].split())
            return text if len(text) <= TITLE_CHARS else text[: TITLE_CHARS - 1] + "…"
    return "(empty chat)"


@dataclass
class Chat:
    """One conversation.

    Attributes:
        id: the file name without ``.json``.
        created / updated: UTC, ``YYYY-MM-DDTHH:MM:SSZ``.
        title: the first question, shortened.
        profile: the profile of the last completed turn.
        messages: validated ``{"role", "content"}`` dicts, oldest first; an answer's may also
            hold ``sources`` and ``index_head`` (``validate_sources``).
        host: the host that created the chat.
    """

    id: str
    created: str
    updated: str
    profile: str
    host: str
    messages: list[dict] = field(default_factory=list)

    def history(self) -> list[dict[str, str]]:
        """The turns as a prompt may replay them: role and content only, never sources."""
        return [{"role": m["role"], "content": m["content"]} for m in self.messages]

    @property
    def title(self) -> str:
        """The first question, whitespace collapsed, cut to TITLE_CHARS with "…"; "(empty chat)"
        when there is none."""
        return _title_of(self.messages)

    def summary(self) -> dict:
        """What the conversation list shows: id, title, times, profile, number of turns."""
        return {"id": self.id, "title": self.title, "created": self.created,
                "updated": self.updated, "profile": self.profile, "host": self.host,
                "turns": sum(1 for m in self.messages if m["role"] == "user")}

    def to_json(self) -> dict:
        """The chat file's JSON object (FORMAT_VERSION, the attributes and the title)."""
        return {"version": FORMAT_VERSION, "id": self.id, "host": self.host,
                "created": self.created, "updated": self.updated, "profile": self.profile,
                "title": self.title, "messages": self.messages}


class ChatStore:
    """The chat folder of one host.

    Args:
        directory: ``AI_DATA_DIR/ai_chats`` (created 0700 on first save).
        host: this host's name (``AI_HOST_NAME``), part of every new chat's file name.
        max_chats: ``AI_CHAT_HISTORY_MAX``; at least one chat is always kept.

    Safe across threads and processes: every read-modify-write of the folder runs under a
    file lock (``.lock`` in the folder).
    """

    def __init__(self, directory: Path, host: str, max_chats: int = 10):
        self.directory = Path(directory)
        self.host = re.sub(r"[^A-Za-z0-9_-]", "-", host)[:40] or "host"
        self.max_chats = max(1, int(max_chats))
        self._lock = FileLock(str(self.directory / ".lock"), timeout=30)

    # -- paths and ids ---------------------------------------------------------------------

    def new_id(self) -> str:
        """A fresh id: creation time (UTC), this host, six random hex digits."""
        return f"{_now().strftime('%Y-%m-%dT%H-%M-%S')}-{self.host}-{_random.token_hex(3)}"

    def path_of(self, chat_id: str) -> Path:
        """The file of ``chat_id``; raises ChatNotFound for a malformed id (no traversal)."""
        if not valid_chat_id(chat_id):
            raise ChatNotFound(f"malformed chat id {chat_id!r}")
        return self.directory / f"{chat_id}.json"

    def _ensure_dir(self) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)

    # -- reading -----------------------------------------------------------------------------

    def _set_aside(self, path: Path, reason: str) -> str | None:
        """Rename a corrupt file to ``….json.corrupt-<timestamp>``; the report, or None when
        another process got there first (so each corrupt file is reported once)."""
        stamp = _now().strftime("%Y%m%dT%H%M%SZ")
        target = path.with_name(f"{path.name}.corrupt-{stamp}")
        n = 1
        while target.exists():
            target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
            n += 1
        try:
            os.replace(path, target)
        except FileNotFoundError:
            return None
        message = f"chat file {path.name} is unreadable ({reason}); set aside as {target.name}"
        log.warning(message)
        return message

    def _read(self, path: Path, set_aside: bool = True) -> Chat:
        """Parse and re-validate one chat file.

        Raises CorruptChat for an unreadable file, after renaming it when ``set_aside``.
        """
        reason = None
        obj = None
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ChatNotFound(path.stem) from None
        except OSError as exc:  # a directory or a special file named <id>.json
            data, reason = b"", f"not a readable file: {exc.strerror or exc}"
        if reason is not None:
            pass
        elif len(data) > MAX_FILE_BYTES:
            reason = f"{len(data)} bytes, over the {MAX_FILE_BYTES}-byte cap of a chat file"
        elif not data:
            reason = "empty file"
        elif data.strip(b"\x00") == b"":
            reason = f"{len(data)} NUL bytes"
        else:
            try:
                obj = json.loads(data.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                reason = f"not valid JSON: {exc}"
            except RecursionError:
                reason = "JSON nested too deeply"
            else:
                if not isinstance(obj, dict) or not isinstance(obj.get("messages"), list):
                    reason = "not a chat object with a messages list"
        if reason is not None:
            if not set_aside:
                raise CorruptChat(f"chat file {path.name} is unreadable ({reason})")
            report = self._set_aside(path, reason)
            raise CorruptChat(report or f"chat file {path.name} was set aside")
        messages = []
        for i, raw in enumerate(obj["messages"]):
            try:
                messages.append(validate_message(raw))
            except InvalidMessage as exc:
                message = _without_sources(raw)
                if message is not None:  # the answer is kept, its bad record dropped
                    log.warning("chat %s: message %d sources dropped on load: %s",
                                path.stem, i, exc)
                    messages.append(message)
                    continue
                # Never replayed into a prompt; logged without the content itself.
                log.warning("chat %s: message %d rejected on load: %s", path.stem, i, exc)
        if len(messages) > MAX_MESSAGES:
            messages = messages[-MAX_MESSAGES:]
        mtime = _fmt(datetime.fromtimestamp(path.stat().st_mtime, timezone.utc))
        created = obj.get("created") if isinstance(obj.get("created"), str) else mtime
        updated = obj.get("updated") if isinstance(obj.get("updated"), str) else created
        profile = obj.get("profile") if isinstance(obj.get("profile"), str) else ""
        host = obj.get("host") if isinstance(obj.get("host"), str) else ""
        return Chat(id=path.stem, created=created[:40], updated=updated[:40],
                    profile=profile[:40], host=host[:64], messages=messages)

    def load(self, chat_id: str) -> Chat:
        """The chat ``chat_id``, its messages re-validated.

        Raises ChatNotFound (no such chat or malformed id) or CorruptChat (the file was
        unreadable and has now been set aside).
        """
        return self._read(self.path_of(chat_id))

    def _scan(self, set_aside: bool = True) -> tuple[list[Chat], list[str]]:
        chats, problems = [], []
        if not self.directory.is_dir():
            return chats, problems
        for path in sorted(self.directory.glob("*.json")):
            if not valid_chat_id(path.stem):
                continue
            try:
                chats.append(self._read(path, set_aside))
            except ChatNotFound:
                continue  # deleted meanwhile
            except CorruptChat as exc:
                problems.append(str(exc))
        return chats, problems

    def list_chats(self) -> tuple[list[dict], list[str]]:
        """Summaries of all readable chats, newest first, and reports of files set aside.

        Returns:
            (summaries, problems): ``Chat.summary()`` dicts sorted by ``updated`` descending;
            one message per corrupt file renamed during this call.
        """
        chats, problems = self._scan()
        chats.sort(key=lambda c: (c.updated, c.id), reverse=True)
        return [c.summary() for c in chats], problems

    # -- writing -----------------------------------------------------------------------------

    def _write(self, chat: Chat) -> None:
        """Atomic replace of the chat's file (tmp in the same folder, fsync, rename)."""
        self._ensure_dir()
        target = self.path_of(chat.id)
        payload = json.dumps(chat.to_json(), ensure_ascii=False, indent=1).encode("utf-8")
        write_atomic(target, payload, mode=None)

    def create(self, messages: list[dict] | None = None, profile: str = "") -> Chat:
        """Store a new chat (an import, or an empty one) after validating every message.

        Raises InvalidMessage when any message is invalid (nothing is written then).
        """
        checked = validate_messages(messages or [])
        ts = _fmt(_now())
        chat = Chat(id=self.new_id(), created=ts, updated=ts, profile=profile, host=self.host,
                    messages=checked)
        self._ensure_dir()
        with self._lock:
            self._write(chat)
            self._prune(keep=chat.id)
        return chat

    def append_turn(self, chat_id: str | None, question: str, answer: str,
                    profile: str, sources: list[dict] | None = None,
                    index_head: str | None = None, record: dict | None = None,
                    replace_last: bool = False, stopped: bool = False) -> Chat:
        """Add one completed turn (question and answer) and save; a new chat when no id.

        Called only when a turn completed or was stopped (``stopped``: the partial answer,
        marked ``"stopped": true``); a failed turn is never stored. ``replace_last``: the
        chat's last question and answer are replaced (regenerate, edit and resend).
        ``sources`` (the answer's citations, ``varaverk.retrieval.search.citations`` entries) and
        ``index_head`` are kept with the answer as its record (``validate_sources``), and
        ``record`` (``turn_record.validate_record``) as what else the turn showed.

        Raises:
            InvalidMessage: question or answer over the cap (nothing written); a malformed
                sources record is logged and the answer saved without it.
            ChatNotFound / CorruptChat: ``chat_id`` given but not loadable.
        """
        question_message = validate_message({"role": "user", "content": question})
        answer_message = validate_message({"role": "assistant", "content": answer})
        if sources:
            try:
                answer_message = validate_message({**answer_message, "sources": sources,
                                                   "index_head": index_head})
            except InvalidMessage as exc:  # the answer is still worth keeping
                log.warning("answer saved without its sources: %s", exc)
        if record:
            try:
                kept = validate_record(record)
            except InvalidRecord as exc:
                log.warning("answer saved without its record: %s", exc)
            else:
                if kept:  # a turn that showed nothing more than its answer keeps no record
                    answer_message["record"] = kept
        if stopped:
            answer_message["stopped"] = True
        pair = [question_message, answer_message]
        self._ensure_dir()
        with self._lock:
            ts = _fmt(_now())
            if chat_id:
                chat = self.load(chat_id)
            else:
                chat = Chat(id=self.new_id(), created=ts, updated=ts, profile=profile,
                            host=self.host)
            kept = chat.messages
            if replace_last and [m["role"] for m in kept[-2:]] == ["user", "assistant"]:
                kept = kept[:-2]
            chat.messages = (kept + pair)[-MAX_MESSAGES:]
            chat.updated = ts
            chat.profile = profile
            self._write(chat)
            self._prune(keep=chat.id)
        return chat

    def delete(self, chat_id: str) -> None:
        """Remove a chat. Raises ChatNotFound when it does not exist or the id is malformed."""
        path = self.path_of(chat_id)
        with self._lock:
            try:
                path.unlink()
            except FileNotFoundError:
                raise ChatNotFound(chat_id) from None

    def _prune(self, keep: str) -> None:
        """Delete the oldest chats (by creation) beyond ``max_chats``, never ``keep``; and
        temporary files that a killed save left behind (older than STALE_TMP_SECONDS)."""
        now = time.time()
        for tmp in self.directory.glob(".*.tmp"):
            try:
                if now - tmp.stat().st_mtime > STALE_TMP_SECONDS:
                    tmp.unlink()
            except FileNotFoundError:
                pass
        # Corrupt files are left for the next listing to set aside and report to the user.
        chats, _ = self._scan(set_aside=False)
        excess = len(chats) - self.max_chats
        if excess <= 0:
            return
        for chat in sorted(chats, key=lambda c: (c.created, c.id)):
            if excess <= 0:
                break
            if chat.id == keep:
                continue
            try:
                self.path_of(chat.id).unlink()
                log.info("pruned chat %s (AI_CHAT_HISTORY_MAX=%d)", chat.id, self.max_chats)
            except FileNotFoundError:
                pass
            excess -= 1
