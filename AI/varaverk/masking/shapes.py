"""Shapes of secrets shared by redaction (``scrubbing``) and document masking
(``documents``): secret-named keys and words, URL credentials, ``Bearer`` headers, PEM private
keys, crypt hashes, ``mysql -pX``, vendor token shapes (detect-secrets), high entropy.

detect-secrets is imported by ``token_shapes`` on first use, never on start-up.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache


REDACTED = "[redacted]"
MASK = "[masked]"

SECRET_KEY = re.compile(
    r"(TOKEN|PASS|PWD|(^|_)PW($|_)|SECRET|(^|_)KEYS?($|_)|APIKEY|PRIVATE|CRED|"
    r"(^|_)AUTH(?!ORS?($|[_-]))|COOKIE|SESSION|SALT|SIGNATURE|(^|_)DSN($|_)|WEBHOOK|PSK|"
    r"(^|_)PIN($|_)|LOGIN|OBSCURED|"
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
    r"(?:sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|"
    r"github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{16,}|xox[abprs]-[A-Za-z0-9-]{10,}|"
    r"AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}|"
    r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}|"
    r"tskey-[a-z]+-[A-Za-z0-9]{6,}-[A-Za-z0-9]{16,}|hv[sbr]\.[A-Za-z0-9_-]{20,}|"
    r"K10[0-9a-f]{64}::[a-z]+:[A-Za-z0-9._-]{6,})")
LONG_TOKEN = re.compile(r"[A-Za-z0-9+/=_-]{24,}")

# mysql -pSECRET (no space: the password itself), sshpass -p SECRET, docker login -p SECRET,
# curl -u user:SECRET.
CLI_PASSWORD = re.compile(
    r"(?P<pre>\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mysqlshow|mariadb|"
    r"mariadb-dump)\b[^\n]*?\s-p)(?P<value>[^\s'\"`]+)"
    r"|(?P<pre2>\bsshpass\s+-p\s*)(?P<value2>[^\s`]+)"
    r"|(?P<pre3>\b(?:docker|podman|nerdctl|helm|skopeo|buildah|oras)\s+(?:registry\s+)?login"
    r"\b[^\n|;&]*?\s(?:-p|--password)(?:\s+|=))(?P<value3>[^\s'\"`]+)"
    r"|(?P<pre4>\bcurl\b[^\n|;&]*?\s(?:-u|--user)\s*['\"]?[^\s:'\"]+:)(?P<value4>[^\s'\"`]+)"
    # redis-server --requirepass X, redis-cli -a X, mosquitto_pub -P X; also as a compose
    # command's list ("--requirepass", "X").
    r"|(?P<pre5>(?:\bredis-server\b[^\n|;&]*?[\s\"',](?:--requirepass|--masterauth)"
    r"|\bredis-cli\b[^\n|;&]*?[\s\"',](?:-a|--pass)"
    r"|\bmosquitto_(?:pub|sub|rr)\b[^\n|;&]*?[\s\"',]-P)(?:\s+|=|[\"']\s*,\s*[\"']))"
    r"(?P<value5>[^\s'\"`,\]]+)")
CLI_VALUES = ("value", "value2", "value3", "value4", "value5")
# Redis: an ACL rule's ">password" (redis.conf ``user alice on >pw ~* +@all``, ``ACL SETUSER``)
# and sentinel's ``sentinel auth-pass <master> <password>``.
REDIS_PASSWORD = re.compile(
    r"(?:^[ \t#]*user|\bACL\s+SETUSER)\s+\S+(?:\s+[^\s>]\S*)*?\s+>(?P<acl>[^\s'\"`]+)"
    r"|\bsentinel\s+auth-pass\s+\S+\s+(?P<sentinel>[^\s'\"`]+)", re.I)


def cli_value(m: re.Match) -> str:
    """The group of a ``CLI_PASSWORD`` match that holds the password (``value``...)."""
    return next(g for g in CLI_VALUES if m.group(g) is not None)
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


# npm's "//host/:_authToken=X" within one word: detect-secrets' ".+" form costs the square of
# a long line's length and masks the rest of the line.
_NPMRC = r"//\S+/:_authToken=\s*(?:npm_[A-Za-z0-9]+|[A-Fa-f0-9-]{36})"


@lru_cache(maxsize=2)
def token_shapes(bounded: bool = False) -> re.Pattern[str]:
    """One regex of token shapes: detect-secrets' vendor patterns plus our own prefixes.

    ``bounded`` (documents): our prefixes only where a word starts, so "SanDisk-..." or
    "desktop-..." is no OpenAI key; logs and prompts match them anywhere.
    detect-secrets is imported on first use (about half a second), never on start-up.
    """
    import importlib

    parts = [r"(?<![A-Za-z0-9_-])" + _OWN_PREFIXED if bounded else _OWN_PREFIXED]
    for module, cls in _DETECT_SECRETS_PLUGINS:
        try:
            plugin = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), cls)
        except ImportError:  # an installation older than this dependency: our prefixes only
            import logging
            logging.getLogger("varaverk").warning(
                "detect-secrets is not installed: only built-in token shapes are recognised "
                "(pip install -e . to add it)")
            break
        # Their patterns use groups for the secret; ours only need where the match is.
        parts.extend(_NPMRC if bounded and "_authToken" in p.pattern else p.pattern
                     for p in plugin.denylist if "PRIVATE KEY" not in p.pattern)
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
    """``https://user:pw@host/x`` becomes ``https://[redacted]@host/x`` (an empty user and
    ``@`` in the password too: ``redis://:pw@h``, ``postgres://u:p@ss@db``)."""
    value = DOC_URL_CREDS.sub(lambda m: f"{m.group('scheme')}{mask}@", value)
    return URL_CREDS.sub(lambda m: f"{m.group('scheme')}{mask}@", value)

# "$$" is a compose file's escaped "$" (traefik basicauth labels).
CRYPT_HASH = re.compile(
    r"(?<![\w$])(?:\$\$?(?:1|2[abxy]?|5|6|apr1|y|gy|7|md5|sha1)\$[./A-Za-z0-9$=,]{8,}"
    r"|\$\$?(?:argon2(?:id|i|d)|pbkdf2(?:-sha\d+)?|scrypt|bcrypt-sha256)\$[./A-Za-z0-9$=,+-]{16,}"
    r"|pbkdf2_sha(?:1|256|512)\$\d+\$[A-Za-z0-9+/=.$]{8,}"
    r"|\{(?:SSHA|SHA|SSHA256|SSHA512|CRYPT|MD5|SMD5)\}[A-Za-z0-9+/=.$]{8,})")
# Credentials in a URL: the password runs to the last "@" before the host ("p@ss@db").
DOC_URL_CREDS = re.compile(
    r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)(?P<user>[^/\s:@\"'`<>]*):(?P<pw>[^/\s\"'`<>]*)@"
    r"(?=[^\s@/\"'`<>]*(?:[/\s\"'`<>?#]|$))", re.I)
