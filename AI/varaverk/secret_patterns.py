"""What a secret looks like: the one home for secret patterns.

Shared by the capabilities' redaction (``scrub``: log lines, conf values, bug drafts, every
prompt block) and by the indexer's masking of tracked documents (``mask_secrets``: a secret
committed by mistake must never be embedded, since a vector cannot be cleaned afterwards).

The patterns:

* secret key names (``key_looks_secret``): TOKEN, PASS/PASSWORD/PWD/PW, SECRET, KEY, PSK, PIN,
  CRED/CREDENTIAL, LOGIN, AUTH, PRIVATE, OBSCURED, ENC/ENCRYPT, COOKIE, SESSION, SALT, DSN,
  WEBHOOK...;
* ``key = value`` pairs under such a key, whatever the quoting: ``KEY=X``, ``KEY='X Y'``,
  ``{"password": "X"}``, ``secret: X``, ``--password=X``; and ``mysql -pX``;
* token shapes: detect-secrets' maintained per-vendor patterns (AWS, GitHub, GitLab, Slack,
  Stripe, OpenAI, JWT, PyPI, npm, SendGrid, Telegram, Discord, private keys...) plus a few
  prefixes of our own, credentials in URLs, ``Bearer``/``Basic`` headers, PEM private keys;
* long high-entropy strings (``looks_random``).
"""

from __future__ import annotations

import importlib
import logging
import math
import re
from collections import Counter
from functools import lru_cache
from typing import NamedTuple

REDACTED = "[redacted]"
MASK = "[masked]"

SECRET_KEY = re.compile(
    r"(TOKEN|PASS|PWD|(^|_)PW($|_)|SECRET|(^|_)KEYS?($|_)|APIKEY|PRIVATE|CRED|(^|_)AUTH(?!ORS?($|[_-]))|"
    r"COOKIE|SESSION|SALT|SIGNATURE|(^|_)DSN($|_)|WEBHOOK|PSK|(^|_)PIN($|_)|LOGIN|OBSCURED|"
    r"(^|_)ENC($|_|RYPT)|CIPHER|HMAC|(^|_)T?OTP($|_))", re.I)
SECRET_WORD = re.compile(r"(passw|secret|token|api[_-]?key|private[_-]?key|credential|bearer)",
                         re.I)
URL_CREDS = re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)(?P<user>[^/\s:@]+):(?P<pw>[^/\s@]+)@",
                       re.I)
# A credential after the scheme has a digit ("Basic conformance" is prose).
BEARER = re.compile(r"\b(Bearer|Basic|Token)\s+(?=[A-Za-z._~+/=-]*\d)[A-Za-z0-9._~+/=-]{12,}", re.I)
PEM = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|\Z)",
                 re.S)
_OWN_PREFIXED = (
    r"sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|"
    r"glpat-[A-Za-z0-9_-]{16,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}|"
    r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")
LONG_TOKEN = re.compile(r"[A-Za-z0-9+/=_-]{24,}")
# Documents are full of long paths, URLs and file names: only unbroken letter-and-digit runs
# count as high-entropy strings there.
LONG_ALNUM = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9+=]{24,}(?![A-Za-z0-9])")
# ``key<sep>value``: the key may be quoted (JSON), the value double-, single- or unquoted.
PAIR = re.compile(
    r"(?P<key>(?<![\w.$])[A-Za-z_][\w.-]{0,80})(?P<kq>[\"']?)(?P<sep>[ \t]*:?=[ \t]*|[ \t]*:(?!:)[ \t]*"
    r"|[ \t]+)(?:\"(?P<dq>[^\"\n]*)\"|'(?P<sq>[^'\n]*)'|(?P<bare>[^\s\"',;&}\])`]+))")
_KEY_START = re.compile(r"(?<![\w.$])[A-Za-z_][\w.-]{0,80}")
# Keys that name something about a secret, not the secret: its file, its length, its lifetime.
_ABOUT_A_SECRET = re.compile(
    r"[_.-](FILE|PATH|DIR|URL|HOURS|MINUTES|SECONDS|DAYS|TIMEOUT|LENGTH|LEN|COUNT|MAX|MIN|SIZE|"
    r"LIMIT|RATE|ENABLED|TTL|INTERVAL|EXPIRY|NAME|USER|HEADER|FORMAT|MODE|TYPE|METHOD|LIFETIME|"
    r"ENDPOINT|RESET|ID|PROVIDER|POLICY|ALGORITHM|ALG|SCOPES?|EMAIL|DICT|CHECKERS?)$", re.I)
# Document values that are no secret: a plain URL, a dotted name (m.megolm.v1, a.b.Type),
# a sentence of three words or more, a list of setting names (MOVER_STOP_TIMEOUT LOG_DIR).
_DOC_VALUE = re.compile(r"^(https?://[^\s@]+|[\w-]+(\.[\w-]+)+|\S+(\s+\S+){2,}|"
                        r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)+(\s+[A-Z][A-Z0-9]*(_[A-Z0-9]+)+)*)$")
# Keys whose value may be all digits and still a secret; under any other key a number is a
# count, a size or a port.
_NUMERIC_SECRET_KEY = re.compile(r"PASS|PWD|(^|_)PW($|_)|(^|_)PIN($|_)|(^|_)T?OTP($|_)|CODE",
                                 re.I)
# mysql -pSECRET (no space: the password itself), sshpass -p SECRET.
CLI_PASSWORD = re.compile(
    r"(?P<pre>\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mysqlshow|mariadb|"
    r"mariadb-dump)\b[^\n]*?\s-p)(?P<value>[^\s'\"`]+)|(?P<pre2>\bsshpass\s+-p\s*)(?P<value2>[^\s`]+)")
# Documentation's stand-ins for a value: empty, <...>, {{...}}, X / xxx / "X Y" (letters that
# name a value, far too short to be one), changeme, your-...
_PLACEHOLDER = re.compile(
    r"^(|<[^>]*>|\{\{.*\}\}|\{[A-Za-z_]+\}|x+|[A-Za-z](\s[A-Za-z])+|\*+|\.\.\.|…|changeme|"
    r"change[-_]?me|your[-_ ].*|example.*|none|null|true|false|yes|no|on|off|value|secret|password|passwd|"
    r"pass|token|key|string|\[redacted\]|\[masked\])$", re.I)
_VARIABLE = re.compile(r"\$\{?[A-Za-z_]")
# Vendor detectors of detect-secrets whose patterns are token shapes (no keyword, no IP).
_DETECT_SECRETS_PLUGINS = (
    ("aws", "AWSKeyDetector"), ("azure_storage_key", "AzureStorageKeyDetector"),
    ("discord", "DiscordBotTokenDetector"), ("github_token", "GitHubTokenDetector"),
    ("gitlab_token", "GitLabTokenDetector"), ("jwt", "JwtTokenDetector"),
    ("mailchimp", "MailchimpDetector"), ("npm", "NpmDetector"), ("openai", "OpenAIDetector"),
    ("pypi_token", "PypiTokenDetector"), ("sendgrid", "SendGridDetector"),
    ("slack", "SlackDetector"), ("square_oauth", "SquareOAuthDetector"),
    ("stripe", "StripeDetector"), ("telegram_token", "TelegramBotTokenDetector"),
    ("twilio", "TwilioKeyDetector"),
)


@lru_cache(maxsize=1)
def token_shapes() -> re.Pattern[str]:
    """One regex of token shapes: detect-secrets' vendor patterns plus our own prefixes.

    detect-secrets is imported on first use (it is slow to import), never on start-up.
    """
    parts = [_OWN_PREFIXED]
    for module, cls in _DETECT_SECRETS_PLUGINS:
        try:
            plugin = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), cls)
        except ImportError:  # an installation older than this dependency: our prefixes only
            logging.getLogger("varaverk").warning(
                "detect-secrets is not installed: only built-in token shapes are recognised "
                "(pip install -e . to add it)")
            break
        # Their patterns use groups for the secret; ours only need where the match is.
        parts.extend(p.pattern for p in plugin.denylist if "PRIVATE KEY" not in p.pattern)
    return re.compile("|".join(f"(?:{p})" for p in parts))


def key_looks_secret(key: str) -> bool:
    """True when a key names a secret (TOKEN, PASS, SECRET, KEY, PSK, PIN, CRED, LOGIN...)."""
    return bool(SECRET_KEY.search(key))


def entropy_bits(text: str) -> float:
    """Shannon entropy of ``text`` in bits per character (0.0 for an empty string)."""
    if not text:
        return 0.0
    counts = Counter(text)
    return -sum(c / len(text) * math.log2(c / len(text)) for c in counts.values())


def looks_random(token: str, classes_needed: int = 2, bits: float = 3.5) -> bool:
    """A long string of mixed letters and digits with high entropy (an API key, a hash)."""
    if len(token) < 20:
        return False
    classes = sum(bool(re.search(p, token)) for p in (r"[a-z]", r"[A-Z]", r"[0-9]"))
    return classes >= classes_needed and entropy_bits(token) >= bits


def value_looks_secret(value: str) -> str | None:
    """Why a configuration value looks secret (a short reason), or None."""
    if URL_CREDS.search(value):
        return "holds credentials in a URL"
    if PEM.search(value) or token_shapes().search(value) or BEARER.search(value):
        return "looks like a key or token"
    if SECRET_WORD.search(value):
        return "mentions a secret"
    if any(looks_random(t) for t in LONG_TOKEN.findall(value)):
        return "looks like a random key"
    return None


def mask_url_credentials(value: str, mask: str = REDACTED) -> str:
    """``https://user:pw@host/x`` becomes ``https://[redacted]@host/x``."""
    return URL_CREDS.sub(lambda m: f"{m.group('scheme')}{mask}@", value)


def _pair_value(m: re.Match, strict: bool = True) -> tuple[str, int, int] | None:
    """The secret value of a ``PAIR`` match as ``(value, start, end)``, or None to keep it.

    ``strict`` (logs, prompts): a plain word after ``key:`` is kept only in lower case;
    otherwise (documents) any plain word is prose (``Authorization: Bearer``).
    """
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
        if sep == ":" and value.isalpha() and (value.islower() or len(value) < 6 or not strict):
            return None  # "auth: failed" is a log message, "ALARM_PIN: 4711" is not
        if len(value) < 4:
            return None  # "token: 3 failures", "PIN_LENGTH=4"
    return value, m.start(group), m.end(group)


def _sub_pairs(text: str, replacement, keep=None, strict: bool = True
               ) -> tuple[str, list[tuple[int, str]]]:
    out, pos, hits = [], 0, []
    # Every word may start a pair ("env DB_PASS='x'"): try each secret-looking one in turn.
    for km in _KEY_START.finditer(text):
        if km.start() < pos or not (key_looks_secret(km.group()) or SECRET_WORD.search(km.group())):
            continue
        m = PAIR.match(text, km.start())
        if m is None or m.group("key") != km.group():
            continue
        if not strict and (_ABOUT_A_SECRET.search(m.group("key"))
                           or not m.group("sep").strip()):
            continue  # in documents: "AuthName \"Restricted\"", "token_lifetime: 24h"
        found = _pair_value(m, strict)
        if found is None or (keep is not None and keep(found[0])):
            continue
        if not strict and found[0].isdigit() and not _NUMERIC_SECRET_KEY.search(m.group("key")):
            continue  # in documents: "AI_TOKEN_RETAIN_ROWS=20000" is a count
        _, start, end = found
        out.append(text[pos:start])
        out.append(replacement)
        pos = end
        hits.append((start, m.group("key")))
    out.append(text[pos:])
    return "".join(out), hits


def _sub_cli_passwords(text: str, replacement: str, keep=None) -> str:
    """``mysql -pX`` and ``sshpass -p X`` with X replaced, unless ``keep(X)`` says it is a
    placeholder (documents: ``-pX``, ``-p$DB_PASS``)."""
    def one(m: re.Match) -> str:
        pre, value = (("pre", "value") if m.group("pre") is not None else ("pre2", "value2"))
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
    text = PEM.sub(REDACTED, text)
    text = mask_url_credentials(text)
    text = BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = token_shapes().sub(REDACTED, text)
    text = _sub_cli_passwords(text, REDACTED)
    return _sub_pairs(text, REDACTED)[0]


class MaskedText(NamedTuple):
    """A document with its secret-looking values masked.

    Attributes:
        text: the text, each masked value replaced by ``MASK`` (keys and quotes kept).
        hits: ``(line, what)`` per masked value, 1-based line numbers; ``what`` is the key, or
            the kind of string for a value found by its shape alone.
    """

    text: str
    hits: tuple[tuple[int, str], ...]


def _is_placeholder(value: str) -> bool:
    """Documentation values that are not secrets: empty, ``<...>``, ``$VAR``, a path, a flag."""
    v = value.strip()
    return bool(_PLACEHOLDER.match(v) or _VARIABLE.search(v) or _DOC_VALUE.match(v)
                and not looks_random(v, 3, 4.0)) or v.startswith("<") or (
        v.startswith(("/", "~/", "./")) and " " not in v)


def _mask_url_credentials(line: str) -> str:
    def one(m: re.Match) -> str:
        if _is_placeholder(m.group("pw")) or _is_placeholder(m.group("pw").strip("{}")):
            return m.group(0)
        return f"{m.group('scheme')}{MASK}@"
    return URL_CREDS.sub(one, line)


def mask_secrets(text: str) -> MaskedText:
    """Mask secret-looking values in a tracked document before it is chunked and embedded.

    Masked: the value of a pair whose key names a secret (``DB_PASSWORD="x"`` becomes
    ``DB_PASSWORD="[masked]"``) unless it is a placeholder, a path or a variable reference;
    token shapes, credentials in URLs and PEM private keys anywhere; long strings of upper
    and lower case letters and digits with high entropy (not hex checksums or UUIDs).
    """
    hits: list[tuple[int, str]] = []
    out_lines = []
    for number, line in enumerate(text.split("\n"), 1):
        masked, pairs = _sub_pairs(line, MASK, keep=_is_placeholder, strict=False)
        hits.extend((number, key) for _, key in pairs)
        for sub, what in ((_mask_url_credentials, "credentials in a URL"),
                          (lambda t: token_shapes().sub(MASK, t), "token"),
                          (lambda t: BEARER.sub(lambda m: f"{m.group(1)} {MASK}", t),
                           "authorization header")):
            changed = sub(masked)
            if changed != masked:
                hits.append((number, what))
                masked = changed
        cli = _sub_cli_passwords(masked, MASK, keep=_is_placeholder)
        if cli != masked:
            hits.append((number, "password on a command line"))
            masked = cli
        for token in set(LONG_ALNUM.findall(masked)):
            if looks_random(token, classes_needed=3, bits=4.0):
                masked = masked.replace(token, MASK)
                hits.append((number, "high-entropy string"))
        out_lines.append(masked)
    masked_text = "\n".join(out_lines)
    if PEM.search(masked_text):
        first = masked_text[:PEM.search(masked_text).start()].count("\n") + 1
        masked_text = PEM.sub(MASK, masked_text)
        hits.append((first, "private key"))
    return MaskedText(masked_text, tuple(sorted(set(hits))))
