"""Redaction of logs, conf values, bug drafts and prompt blocks: ``scrub``.

Stricter than the masking of documents, whose rules it applies first: in a log a pair under a
secret-looking key in any quoting is replaced, and token shapes count anywhere in a word.
"""

from __future__ import annotations

import re

from varaverk.masking.documents import mask_secrets
from varaverk.masking.shapes import (BEARER, CLI_PASSWORD, PEM, REDACTED, SECRET_WORD,
                                     cli_value, key_looks_secret, looks_random,
                                     mask_url_credentials, token_shapes)


# ``key<sep>value``: the key may be quoted (JSON), the value double-, single- or unquoted.
PAIR = re.compile(
    r"(?P<key>(?<![\w.$])[A-Za-z_][\w.-]{0,80})(?P<kq>[\"']?)"
    r"(?P<sep>[ \t]*:?=[ \t]*|[ \t]*:(?!:)[ \t]*|[ \t]+)"
    r"(?:\"(?P<dq>[^\"\n]*)\"|'(?P<sq>[^'\n]*)'|(?P<bare>(?:[^\s\"',;&}\])`]|&(?=[^\s&]))+))")
_KEY_START = re.compile(r"(?<![\w.$])[A-Za-z_][\w.-]{0,80}")


def _pair_value(m: re.Match) -> tuple[str, int, int] | None:
    """The secret value of a ``PAIR`` match as ``(value, start, end)``, or None to keep it."""
    if not (key_looks_secret(m.group("key")) or SECRET_WORD.search(m.group("key"))):
        return None
    group = next(g for g in ("dq", "sq", "bare") if m.group(g) is not None)
    value = m.group(group)
    if not value or value.startswith(("[redacted", "[masked")):
        return None
    sep = m.group("sep").strip()
    if group == "bare":
        if value.startswith("$"):  # a variable reference, not a value
            return None
        if sep == "" and not looks_random(value):
            return None  # "token 3 failed": prose, unless the word is followed by a key
        if sep == ":" and value.isalpha() and (value.islower() or len(value) < 6):
            return None  # "auth: failed" is a log message, "ALARM_PIN: 4711" is not
        if len(value) < 4:
            return None  # "token: 3 failures", "PIN_LENGTH=4"
    return value, m.start(group), m.end(group)


def _sub_pairs(text: str, replacement: str) -> str:
    out, pos = [], 0
    # Every word may start a pair ("env DB_PASS='x'"): try each secret-looking one in turn.
    for km in _KEY_START.finditer(text):
        if km.start() < pos or not (key_looks_secret(km.group()) or SECRET_WORD.search(km.group())):
            continue
        m = PAIR.match(text, km.start())
        if m is None or m.group("key") != km.group():
            continue
        found = _pair_value(m)
        if found is None:
            continue
        _, start, end = found
        out.append(text[pos:start])
        out.append(replacement)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _sub_cli_passwords(text: str, replacement: str, keep=None) -> str:
    """``mysql -pX`` and ``sshpass -p X`` with X replaced, unless ``keep(X)`` says it is a
    placeholder (documents: ``-pX``, ``-p$DB_PASS``)."""
    def one(m: re.Match) -> str:
        value = cli_value(m)
        pre = "pre" + value.removeprefix("value")
        if keep is not None and keep(m.group(value)):
            return m.group(0)
        return m.group(pre) + replacement
    return CLI_PASSWORD.sub(one, text)


def scrub(text: str, secrets=()) -> str:
    """``text`` with known secret values and secret-shaped strings replaced by ``[redacted]``.

    ``secrets``: literal values to replace wherever they occur (longest first is best).
    """
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, REDACTED)
    # Every shape of the documents' table first (whole values, "&" and spaces included), then
    # the stricter rules of logs over what is left.
    text = mask_secrets(text, mask=REDACTED).text
    text = PEM.sub(REDACTED, text)
    text = mask_url_credentials(text)
    text = BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = token_shapes().sub(REDACTED, text)
    text = _sub_cli_passwords(text, REDACTED)
    return _sub_pairs(text, REDACTED)
