"""Which values this host holds as secrets, and scrubbing them from what a capability hands
to a model or long-term memory keeps.

Two layers, both applied to every block, query and log line the capabilities produce:
  1. Known secret values: every value of the conf in use (``Settings.conf_file``) whose key or
     content looks secret, every other value of a key not named exactly in
     ``AI_CONF_READ_KEYS`` (an unknown key may hold anything: ``NAS_LOGIN``, ``BACKUP_ENC``),
     the passwords inside URLs there, and the secret settings (``AI_OPENAI_API_KEY``,
     ``AI_DOCK_TOKEN``, ``AI_FLEET_TOKEN``). Each occurrence becomes ``[redacted]`` wherever it
     appears (a log line that echoes a token included).
  2. Shapes of secrets (``varaverk.masking.scrubbing.scrub``, which applies the indexer's
     masking of documents first):
     pairs under a secret key in any quoting, ``mysql -pX``, credentials in URLs, ``Bearer``,
     private-key blocks, vendor token shapes and high-entropy strings.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path

from dotenv import dotenv_values

from varaverk.config import SECRET_KEYS
from varaverk.masking.shapes import URL_CREDS, key_looks_secret, value_looks_secret


def whitelist_patterns(patterns) -> tuple[str, ...]:
    """``AI_CONF_READ_KEYS`` without patterns that match every key (``*``, ``**``, ``?*``):
    a whitelist of everything is no whitelist (load_settings refuses one)."""
    return tuple(p for p in patterns if p.strip("*?"))


def whitelisted(patterns, key: str) -> bool:
    """True when ``key`` matches a name or shell glob of ``AI_CONF_READ_KEYS``."""
    return any(fnmatchcase(key, p) for p in whitelist_patterns(patterns))


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


# Values this short or this plain are not scrubbed as "unknown key" values: replacing every
# "yes" or "5" in a log would hide the log, and they are no credential.
_PLAIN_VALUE = re.compile(r"^(\d{1,5}|yes|no|true|false|on|off|[a-z]{1,7})$", re.I)


@lru_cache(maxsize=8)
def _conf_secrets(path: str, mtime_ns: int, size: int,
                  whitelist: tuple[str, ...] = ()) -> tuple[str, ...]:
    found: set[str] = set()
    for key, value in read_conf(Path(path)).items():
        value = value.strip()
        for m in URL_CREDS.finditer(value):
            found.update({m.group("pw"), f"{m.group('user')}:{m.group('pw')}"})
        if not (key_looks_secret(key) or value_looks_secret(value)):
            # Varaverk's own settings are typed (paths, numbers, URLs); the secret ones are
            # SECRET_KEYS, added below.
            own_setting = key.startswith("AI_") and key not in SECRET_KEYS
            if not (own_setting or whitelisted(whitelist, key) or _PLAIN_VALUE.match(value)):
                found.add(value)  # a key nobody allowed may hold anything
            continue
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
        from_conf = _conf_secrets(str(path), st.st_mtime_ns, st.st_size,
                                  tuple(settings.ai_conf_read_keys))
    except OSError:
        from_conf = ()
    own = [getattr(settings, k.lower(), "") or "" for k in SECRET_KEYS]
    values = set(from_conf) | {s for s in own if len(s) >= 4}
    return tuple(sorted(values, key=len, reverse=True))
