"""Follow-up questions: rewrite the last question of a conversation into a standalone query.

"Can --force-delete get around it?" retrieves nothing useful on its own: "it" lives in an
earlier turn. Before retrieval, the last question is rewritten so that it carries its subject:

- ``model_rewrite``: with a reachable generation model, a short prompt asks for the question
  rewritten as one standalone question (low token limit). Any error, or a reply that is not
  one plausible question (empty, overlong, not ending in "?": small models tend to answer
  instead) falls back to the model-free rewrite; names the model dropped are appended.
- ``carry_subject`` (model-free, always available): when the question looks dependent on the
  conversation (pronouns such as "it"/"that", "and ...", "what about", very short), the salient
  terms of the previous user question, the names in the previous answer and the answer's first
  few content words (where an answer names its subject) are appended to it: the subject may
  have been named by the assistant, not the user.
  A question that stands on its own is returned unchanged.

Only the search query is rewritten; the model still sees the question as the user wrote it,
with the history.
"""

from __future__ import annotations

import inspect
import logging
import re
from typing import Any, Sequence

from varaverk.text import content_words, exact_names

log = logging.getLogger(__name__)

_DEPENDENT = re.compile(
    r"\b(it|its|it's|itself|that|this|these|those|they|them|their|there|one|ones|same|also|too|"
    r"either|instead|equivalent|both|such|him|her|he|she)\b|^\s*(and|but|so|ok|okay|nice|then|"
    r"what about|how about)\b", re.IGNORECASE)
REWRITE_PROMPT = (
    "Rewrite the user's last question as one standalone question that can be understood "
    "without the conversation: replace pronouns such as 'it' or 'that' with what they refer to, "
    "and keep every name, option and value exactly as written. Reply with the question only."
)
MAX_REWRITE_CHARS = 400
MAX_REWRITE_TOKENS = 64
MAX_CARRIED_TERMS = 12
MAX_ANSWER_TERMS = 3


def looks_dependent(question: str) -> bool:
    """Whether the question seems to lean on earlier turns (pronouns, 'and ...', very short)."""
    return bool(_DEPENDENT.search(question)) or len(content_words(question)) < 3


def _last(history: Sequence[dict], role: str) -> str:
    for m in reversed(history):
        if isinstance(m, dict) and m.get("role") == role and isinstance(m.get("content"), str):
            return m["content"]
    return ""


def carry_subject(question: str, history: Sequence[dict] | None) -> str:
    """Model-free rewrite: append the earlier turns' subject to a dependent question.

    Args:
        question: the last user question.
        history: earlier messages ``{"role", "content"}``, oldest first (the question itself
            not included).

    Returns:
        ``question`` unchanged when there is no history or it stands alone; else
        ``"question (terms of the previous question and names of the previous answer)"``.
    """
    if not history or not looks_dependent(question):
        return question
    own = {w.lower() for w in content_words(question)}
    terms: list[str] = []
    # The subject may have been named by either side: "How do I get a Python shell?" is
    # answered "the manhole: add a listener ...", and the follow-up's "it" is the manhole.
    # An answer names its subject first ("Yes, the manhole: ..."), then explains it: its
    # names and its first few content words are carried, not the whole explanation.
    answer = _last(history, "assistant")
    candidates = (content_words(_last(history, "user")) + exact_names(answer)
                  + content_words(answer)[:MAX_ANSWER_TERMS])
    for w in candidates:
        if w.lower() not in own and w.lower() not in (t.lower() for t in terms):
            terms.append(w)
    if not terms:
        return question
    return f"{question.strip()} ({' '.join(terms[:MAX_CARRIED_TERMS])})"


def model_rewrite(question: str, history: Sequence[dict] | None, chat_client: Any) -> str:
    """Rewrite with the generation model; fall back to ``carry_subject`` on any problem.

    Args:
        question: the last user question.
        history: earlier messages, oldest first.
        chat_client: a ``varaverk.answering.generation.streaming.ChatClient``
            (``.stream(messages)``).

    Returns:
        A standalone question (never empty).
    """
    if not history or chat_client is None:
        return carry_subject(question, history)
    convo = "\n".join(f"{m['role']}: {m['content']}" for m in history[-4:]
                      if isinstance(m, dict) and isinstance(m.get("content"), str))
    messages = [
        {"role": "system", "content": REWRITE_PROMPT},
        {"role": "user", "content": f"Conversation:\n{convo}\n\nLast question: {question}"},
    ]
    try:
        kwargs = {}
        params = inspect.signature(chat_client.stream).parameters
        if "max_tokens" in params:
            kwargs["max_tokens"] = MAX_REWRITE_TOKENS
        text = []
        for event in chat_client.stream(messages, **kwargs):
            if event.type == "content":
                text.append(event.text)
                if sum(map(len, text)) > MAX_REWRITE_CHARS:
                    break
        out = " ".join("".join(text).split()).strip().strip('"')
    except Exception as exc:  # any model trouble costs only the rewrite
        log.info("model rewrite failed (%s); carrying the subject without a model", exc)
        return carry_subject(question, history)
    if not _plausible(out, question):
        log.info("model rewrite %r is not a standalone question; carrying the subject", out[:80])
        return carry_subject(question, history)
    missing = [n for n in exact_names(question) if n.lower() not in out.lower()]
    if missing:
        out = f"{out} ({' '.join(missing)})"
    return out


def _plausible(rewrite: str, question: str) -> bool:
    """A rewrite must look like one question: non-empty, ending with "?", not much longer than
    the question plus its subject. Small models often answer instead of rewriting."""
    if not rewrite or len(rewrite) > min(MAX_REWRITE_CHARS, 3 * len(question) + 120):
        return False
    return rewrite.rstrip().endswith("?") and rewrite.count("?") <= 2


def standalone_query(question: str, history: Sequence[dict] | None,
                     chat_client: Any = None) -> str:
    """The query to retrieve with: ``question`` itself without history, else a rewrite (with
    the model when ``chat_client`` is given, else model-free)."""
    if not history:
        return question
    if chat_client is not None:
        return model_rewrite(question, history, chat_client)
    return carry_subject(question, history)
