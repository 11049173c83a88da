"""What a finished turn showed besides its answer, kept with the answer so a reopened chat shows
it again: reasoning, timings, token counts, the escalation badge and the scanner's findings.

Like the sources record (``conversations.validate_sources``) it is read back from disk, so it is
checked on the way in and on the way out, reduced to known fields, and never replayed into a
prompt (``Chat.history()`` keeps role and content only).

Shape (every key optional)::

    {"profile": str, "escalated_to": str, "escalation_reason": str,
     "reasoning": str, "timings": {name: seconds}, "prompt_tokens": int, "completion_tokens": int,
     "tok_s": float, "not_covered": bool, "prompt_cut": bool,
     "findings": [{"line": int, "reason": str, "snippet": str, "rule": str}],
     "capabilities": [{"name": str, "summary": str}],
     "memory": [{"triplet": int, "conversation": str, "said_at": str, "label": str}]}

``memory`` is what long-term memory recalled for the answer (``varaverk.answering.remembering``),
shown as "remembered from ..." badges.
"""

from __future__ import annotations

import math

MAX_REASONING_CHARS = 32_000  # as a message's content
MAX_NAME_CHARS = 200          # a profile, an escalation reason, a timing's name
MAX_TIMINGS = 20
MAX_FINDINGS = 50
MAX_FINDING_CHARS = 1000      # a finding's reason or snippet (the scanner cuts at 200)
MAX_CAPABILITIES = 20
MAX_SUMMARY_CHARS = 4000      # what a capability says it did (a log excerpt's summary)
MAX_RECALLED = 8              # recalled triplets (the hot one and the echoes)
MAX_LABEL_CHARS = 300         # "remembered from 2026-03-02: ..." (cut at 120 by its maker)
_FLAGS = ("not_covered", "prompt_cut")
_COUNTS = ("prompt_tokens", "completion_tokens")


class InvalidRecord(ValueError):
    """A turn record that is not the documented shape (``str`` names the first fault)."""


def _text(value: object, key: str, cap: int) -> str:
    if not isinstance(value, str) or len(value) > cap or "\x00" in value:
        raise InvalidRecord(f"{key} is not a string of at most {cap} characters")
    return value


def _number(value: object, key: str) -> float:
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        raise InvalidRecord(f"{key} is not a finite number >= 0")
    return value


def _timings(raw: object) -> dict[str, float]:
    if not isinstance(raw, dict) or len(raw) > MAX_TIMINGS:
        raise InvalidRecord(f"timings is not an object of at most {MAX_TIMINGS} entries")
    return {_text(k, "a timing name", MAX_NAME_CHARS): float(_number(v, f"timing {k}"))
            for k, v in raw.items()}


def _finding(raw: object) -> dict:
    if not isinstance(raw, dict) or type(raw.get("line")) is not int or raw["line"] < 1:
        raise InvalidRecord("a finding is not an object with a line >= 1")
    return {"line": raw["line"],
            **{k: _text(raw.get(k, ""), f"finding {k}", MAX_FINDING_CHARS)
               for k in ("reason", "snippet", "rule")}}


def _capability(raw: object) -> dict:
    if not isinstance(raw, dict):
        raise InvalidRecord("a capability is not an object")
    return {"name": _text(raw.get("name", ""), "capability name", MAX_NAME_CHARS),
            "summary": _text(raw.get("summary", ""), "capability summary", MAX_SUMMARY_CHARS)}


def _recalled(raw: object) -> dict:
    if not isinstance(raw, dict) or type(raw.get("triplet")) is not int:
        raise InvalidRecord("a recalled memory is not an object with a triplet id")
    return {"triplet": raw["triplet"],
            "conversation": _text(raw.get("conversation", ""), "memory conversation",
                                  MAX_NAME_CHARS),
            "said_at": _text(raw.get("said_at", ""), "memory said_at", MAX_NAME_CHARS),
            "label": _text(raw.get("label", ""), "memory label", MAX_LABEL_CHARS)}


def _listed(raw: object, key: str, cap: int, item) -> list:
    if not isinstance(raw, list) or len(raw) > cap:
        raise InvalidRecord(f"{key} is not a list of at most {cap}")
    return [item(x) for x in raw]


def validate_record(raw: object) -> dict:
    """A turn record, checked and reduced to the keys of the module docstring.

    Raises:
        InvalidRecord: not an object, or a known key holding the wrong type or an oversized
            value (unknown keys are dropped, null values skipped).
    """
    if not isinstance(raw, dict):
        raise InvalidRecord(f"record is a {type(raw).__name__}, not an object")
    out: dict = {}
    for key in ("profile", "escalated_to", "escalation_reason"):
        if raw.get(key) is not None:
            out[key] = _text(raw[key], key, MAX_NAME_CHARS)
    if raw.get("reasoning"):
        out["reasoning"] = _text(raw["reasoning"], "reasoning", MAX_REASONING_CHARS)
    if raw.get("timings") is not None:
        out["timings"] = _timings(raw["timings"])
    for key in _COUNTS:
        if raw.get(key) is not None:
            if type(raw[key]) is not int or raw[key] < 0:
                raise InvalidRecord(f"{key} is not a count")
            out[key] = raw[key]
    if raw.get("tok_s") is not None:
        out["tok_s"] = float(_number(raw["tok_s"], "tok_s"))
    for key in _FLAGS:
        if raw.get(key) is not None:
            if not isinstance(raw[key], bool):
                raise InvalidRecord(f"{key} is not true or false")
            out[key] = raw[key]
    if raw.get("findings") is not None:
        out["findings"] = _listed(raw["findings"], "findings", MAX_FINDINGS, _finding)
    if raw.get("capabilities") is not None:
        out["capabilities"] = _listed(raw["capabilities"], "capabilities", MAX_CAPABILITIES,
                                      _capability)
    if raw.get("memory"):
        out["memory"] = _listed(raw["memory"], "memory", MAX_RECALLED, _recalled)
    return out


def record_of_turn(done: dict, asked_profile: str, events: dict[str, list]) -> dict:
    """The record of a finished turn: from its ``done`` event's data, the profile it was asked
    in, and ``events`` (the data of its ``profile``, ``findings`` and ``capability`` events,
    in order, by type)."""
    record = {key: done.get(key) for key in ("profile", "reasoning", "timings", "tok_s",
                                             "memory", *_COUNTS, *_FLAGS)}
    escalation = (events.get("profile") or [{}])[-1]
    if escalation or (done.get("profile") and done.get("profile") != asked_profile):
        record["escalated_to"] = escalation.get("profile") or done.get("profile")
        record["escalation_reason"] = escalation.get("reason")
    if events.get("findings"):
        record["findings"] = events["findings"][-1].get("findings")
    if events.get("capability"):
        record["capabilities"] = [{"name": c.get("name") or "capability",
                                   "summary": c.get("summary") or ""}
                                  for c in events["capability"]]
    return record
