"""Conf lookup: one value by key from the real master.conf, at question time, redacted.

Contract: ``conf_lookup(profile, settings, key) -> ConfValue`` (requires ``conf_lookup``).
Only keys allowed by ``AI_CONF_READ_KEYS`` (names or shell globs such as ``MIRROR_*``) are
read; any other key raises ``ConfKeyNotAllowed``; ``*`` is no whitelist (refused by
load_settings, ignored here). The file is parsed by python-dotenv without
interpolation, so ``$OTHER`` inside a value is never expanded into another key's value. A key
that names a secret (TOKEN, PASS, PW, SECRET, KEY, PSK, PIN, CRED, LOGIN, ENC, OBSCURED...) or a value that looks
secret (credentials in a URL, a token prefix, a long random string, the word "secret")
comes back as ``[redacted]``; a URL keeps its host with the credentials masked. This is the
only way a live configuration value reaches a model: the index never holds one.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from varaverk.answering.profiles import CONF_LOOKUP
from varaverk.host_secrets import conf_path, known_secrets, read_conf, whitelisted
from varaverk.masking.scrubbing import scrub
from varaverk.masking.shapes import (REDACTED, key_looks_secret, mask_url_credentials,
                                     value_looks_secret)

log = logging.getLogger("varaverk.answering.capabilities")
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,100}$")


class ConfKeyNotAllowed(PermissionError):
    """The key is not on the AI_CONF_READ_KEYS whitelist."""


@dataclass(frozen=True)
class ConfValue:
    """A looked-up value: ``value`` is None when the key is not set; ``redacted`` tells why
    the value is hidden (``reason``)."""

    key: str
    value: str | None
    redacted: bool = False
    reason: str = ""

    def line(self) -> str:
        """One prompt line: ``KEY=value`` (marked when redacted), or ``KEY: not set ...``."""
        if self.value is None:
            return f"{self.key}: not set in master.conf ({self.reason or 'the default applies'})"
        suffix = f" (redacted: {self.reason})" if self.redacted else ""
        return f"{self.key}={self.value}{suffix}"


def allowed(settings, key: str) -> bool:
    """True when ``key`` is on the whitelist (exact names or shell globs; ``*`` alone counts
    for nothing)."""
    return bool(_KEY.match(key)) and whitelisted(settings.ai_conf_read_keys, key)


def keys_in_text(settings, text: str, limit: int = 5) -> list[str]:
    """Whitelisted keys that ``text`` names (``MIRROR_MAX_DELETE_PCT``), in order, unique."""
    out: list[str] = []
    for token in re.findall(r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b|\b[A-Z][A-Z0-9]{2,}\b", text):
        key = token.upper()
        if key not in out and allowed(settings, key):
            out.append(key)
            if len(out) >= limit:
                break
    return out


def conf_lookup(profile, settings, key: str) -> ConfValue:
    """One value of the real master.conf. Raises CapabilityDenied or ConfKeyNotAllowed."""
    profile.require(CONF_LOOKUP)
    key = key.strip()
    if not allowed(settings, key):
        raise ConfKeyNotAllowed(f"{key!r} is not in AI_CONF_READ_KEYS")
    values = read_conf(conf_path(settings))
    log.info("conf lookup: %s", key)  # the key only, never the value
    if key not in values:
        return ConfValue(key, None, reason="the default applies")
    value = values[key]
    if key_looks_secret(key):
        return ConfValue(key, REDACTED, True, "the key names a secret")
    why = value_looks_secret(value)
    if why == "holds credentials in a URL":
        masked = mask_url_credentials(value)
        if value_looks_secret(masked) is None:
            return ConfValue(key, scrub(masked, known_secrets(settings)), True, why)
    if why:
        return ConfValue(key, REDACTED, True, f"the value {why}")
    return ConfValue(key, scrub(value, known_secrets(settings)))


def conf_block(values: list[ConfValue]) -> str:
    """The prompt context block for looked-up values."""
    return "\n".join(["[configuration values read from master.conf just now]"]
                     + [v.line() for v in values])
