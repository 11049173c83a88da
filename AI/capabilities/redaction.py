"""What counts as a secret, and scrubbing it from anything a capability hands to a model.

Two layers, both applied to every block, query and log line the capabilities produce:
  1. Known secret values: every value of the real ``Configurations/master.conf`` whose key or
     content looks secret, the passwords inside URLs there, and the secret settings
     (``AI_OPENAI_API_KEY``, ``AI_DOCK_TOKEN``, ``AI_FLEET_TOKEN``). Each occurrence becomes
     ``[redacted]`` wherever it appears (a log line that echoes a token included).
  2. Shapes of secrets: credentials in URLs (``https://user:pw@host``), ``password=...``/
     ``token: ...`` pairs, ``Bearer ...``, private-key blocks, well-known token prefixes and
     long high-entropy strings next to a secret-looking word.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Iterable

from dotenv import dotenv_values

from varaverk.config import SECRET_KEYS

REDACTED = "[redacted]"

_SECRET_KEY = re.compile(
    r"(TOKEN|PASS(WORD|WD|PHRASE)?|PWD|SECRET|(^|_)KEYS?($|_)|APIKEY|PRIVATE|CREDENTIAL|"
    r"(^|_)AUTH|COOKIE|SESSION|SALT|SIGNATURE|(^|_)DSN($|_)|WEBHOOK)", re.I)
_SECRET_WORD = re.compile(r"(passw|secret|token|api[_-]?key|private[_-]?key|credential|bearer)",
                          re.I)
_URL_CREDS = re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)(?P<user>[^/\s:@]+):(?P<pw>[^/\s@]+)@",
                        re.I)
_PAIR = re.compile(
    r"(?P<key>\b[\w.-]*(?:password|passwd|pwd|passphrase|token|secret|api[_-]?key|apikey|"
    r"access[_-]?key|private[_-]?key|client[_-]?secret|auth|credential)s?[\w.-]*)"
    r"(?P<sep>\s*[=:]\s*|\s+)(?P<q>[\"']?)(?P<value>[^\s\"',;&]{3,})", re.I)
_BEARER = re.compile(r"\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{8,}", re.I)
_PEM = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|\Z)",
                  re.S)
_PREFIXED = re.compile(
    r"\b(sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|"
    r"glpat-[A-Za-z0-9_-]{16,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}|"
    r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})")
_LONG_TOKEN = re.compile(r"[A-Za-z0-9+/=_-]{24,}")


def key_looks_secret(key: str) -> bool:
    """True when a configuration key names a secret (TOKEN, PASS, SECRET, KEY, PRIVATE...)."""
    return bool(_SECRET_KEY.search(key))


def entropy_bits(text: str) -> float:
    """Shannon entropy of ``text`` in bits per character (0.0 for an empty string)."""
    if not text:
        return 0.0
    counts = Counter(text)
    return -sum(c / len(text) * math.log2(c / len(text)) for c in counts.values())


def looks_random(token: str) -> bool:
    """A long string of mixed letters and digits with high entropy (an API key, a hash)."""
    if len(token) < 20:
        return False
    classes = sum(bool(re.search(p, token)) for p in (r"[a-z]", r"[A-Z]", r"[0-9]"))
    return classes >= 2 and entropy_bits(token) >= 3.5


def value_looks_secret(value: str) -> str | None:
    """Why a configuration value looks secret (a short reason), or None."""
    if _URL_CREDS.search(value):
        return "holds credentials in a URL"
    if _PEM.search(value) or _PREFIXED.search(value) or _BEARER.search(value):
        return "looks like a key or token"
    if _SECRET_WORD.search(value):
        return "mentions a secret"
    if any(looks_random(t) for t in _LONG_TOKEN.findall(value)):
        return "looks like a random key"
    return None


def mask_url_credentials(value: str) -> str:
    """``https://user:pw@host/x`` becomes ``https://[redacted]@host/x``."""
    return _URL_CREDS.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", value)


def conf_path(settings) -> Path:
    """The real conf the capabilities read: the one the settings came from
    (``Settings.conf_file``: ``--config``, ``AI_CONFIG`` or Configurations/master.conf)."""
    return settings.conf_file


def read_conf(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` pairs of a shell-style conf (python-dotenv, no interpolation); {} if absent."""
    try:
        if not path.is_file():
            return {}
        return {k: v for k, v in dotenv_values(path, interpolate=False).items() if v is not None}
    except (OSError, UnicodeDecodeError, ValueError):
        return {}


@lru_cache(maxsize=8)
def _conf_secrets(path: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    found: set[str] = set()
    for key, value in read_conf(Path(path)).items():
        value = value.strip()
        for m in _URL_CREDS.finditer(value):
            found.update({m.group("pw"), f"{m.group('user')}:{m.group('pw')}"})
        if key_looks_secret(key) or value_looks_secret(value):
            found.add(value)
            # A secret inside a sentence ("my secret s3-cr3t") may be echoed on its own:
            # its non-word tokens (digits, symbols, mixed case) count as secrets too.
            found.update(t for t in value.split() if len(t) >= 6 and not t.isalpha()
                         or len(t) >= 6 and not (t.islower() or t.isupper() or t.istitle()))
    return tuple(sorted((s for s in found if len(s) >= 4), key=len, reverse=True))


def known_secrets(settings) -> tuple[str, ...]:
    """Secret values this host holds: secret settings and secret-looking values of the conf.

    Longest first, so a value containing another is replaced whole. Cached per conf file
    version (path, mtime, size), so each call costs a stat.
    """
    path = conf_path(settings)
    try:
        st = path.stat()
        from_conf = _conf_secrets(str(path), st.st_mtime_ns, st.st_size)
    except OSError:
        from_conf = ()
    own = [getattr(settings, k.lower(), "") or "" for k in SECRET_KEYS]
    values = set(from_conf) | {s for s in own if len(s) >= 4}
    return tuple(sorted(values, key=len, reverse=True))


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with known secret values and secret-shaped strings replaced by ``[redacted]``."""
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, REDACTED)
    text = _PEM.sub(REDACTED, text)
    text = mask_url_credentials(text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _PREFIXED.sub(REDACTED, text)

    def pair(m: re.Match) -> str:
        value = m.group("value")
        if value == REDACTED.strip("[]") or value.startswith("[redacted"):
            return m.group(0)
        # "token: 3 failures" is prose; a value with a digit or of length >= 8 is a credential.
        if m.group("sep").strip() == "" and not looks_random(value):
            return m.group(0)
        if len(value) < 6 and not re.search(r"\d", value):
            return m.group(0)
        return f"{m.group('key')}{m.group('sep')}{m.group('q')}{REDACTED}"

    return _PAIR.sub(pair, text)
