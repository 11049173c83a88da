"""The dock's request checks: where it may listen, who may call it, what a request may carry.

One home for every check the dock makes before a route runs:

- ``check_bind``: a bind address other than loopback requires ``AI_DOCK_TOKEN`` (the dock
  refuses to start without it). ``check_listeners`` applies the same rule to the addresses
  gunicorn really binds (its ``--bind``/``GUNICORN_CMD_ARGS`` override the setting, and
  systemd may hand over sockets), from the server hooks in Deployment/gunicorn.conf.py.
- ``token_ok`` / ``session_cookie_value``: the token, compared in constant time
  (``hmac.compare_digest``); the browser keeps a derived cookie value, never the token itself.
- ``same_origin``: state-changing requests must come from the dock's own page
  (``Sec-Fetch-Site``, else ``Origin``, else ``Referer``), so another site open in the same
  browser cannot post questions or delete chats.
- ``host_allowed``: on a loopback bind without a token, the ``Host`` header must be a loopback
  name, which defeats DNS rebinding (a foreign name resolving to 127.0.0.1).
- ``valid_chat_id``: chat ids are a closed alphabet with no dots or slashes, so an id can never
  name a path outside the chat folder.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
from urllib.parse import urlsplit

from varaverk.config import ConfigError

TOKEN_HEADER = "X-Varaverk-Token"
TOKEN_COOKIE = "varaverk_dock"
LOOPBACK_NAMES = frozenset({"localhost", "ip6-localhost", "ip6-loopback"})
CHAT_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")


def parse_bind(bind: str) -> tuple[str, int]:
    """Split ``AI_DOCK_BIND`` (``host:port``, ``[v6]:port``) into host and port.

    Raises ConfigError naming the key when the value has no valid port.
    """
    raw = bind.strip()
    if raw.startswith("["):
        host, sep, port = raw[1:].partition("]:")
    else:
        host, sep, port = raw.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"AI_DOCK_BIND: expected host:port, got {bind!r}")
    return host, int(port)


def dock_url(host: str, port: int) -> str:
    """The address to open in a browser: ``http://127.0.0.1:8470/``, ``http://[::1]:8470/``."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def is_loopback_host(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and the usual loopback names (``localhost``)."""
    name = host.strip().strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(bind: str, token: str) -> bool:
    """Validate the listening address; True when it is loopback.

    Raises ConfigError when the bind is malformed, or not loopback while ``AI_DOCK_TOKEN`` is
    empty: a dock reachable from the network without a token would let anyone on it read the
    conversations and spend the model server's time.
    """
    host, _ = parse_bind(bind)
    loopback = is_loopback_host(host)
    if not loopback and not token:
        raise ConfigError(
            f"AI_DOCK_BIND={bind} is not a loopback address: set AI_DOCK_TOKEN "
            "(the dock refuses to listen on the network without a token)")
    return loopback


def check_listeners(addresses, token: str) -> bool:
    """The bind rule over the addresses a server really listens on; True when all are loopback.

    Args:
        addresses: gunicorn bind strings (``host:port``, ``[v6]:port``, ``unix:/path``, ``fd://3``)
            or socket addresses (``(host, port[, flow, scope])`` tuples, or a path for a Unix
            socket). A Unix socket is local (its file permissions decide who may connect).
    Raises:
        ConfigError: an address is not loopback while ``AI_DOCK_TOKEN`` is empty, naming it;
            a file-descriptor bind whose address cannot be known counts as not loopback.
    """
    loopback = True
    for address in addresses:
        if isinstance(address, (tuple, list)):
            host = str(address[0])
            shown = f"[{host}]:{address[1]}" if ":" in host else f"{host}:{address[1]}"
        elif isinstance(address, (bytes, str)) and not str(address).startswith(("fd://", "unix:")) \
                and ":" not in str(address).lstrip("["):
            continue  # a Unix socket path (gunicorn reports it bare)
        else:
            shown = str(address)
            if shown.startswith("unix:"):
                continue
            host = "" if shown.startswith("fd://") else parse_bind(shown)[0]
        if not is_loopback_host(host):
            loopback = False
            if not token:
                raise ConfigError(
                    f"the dock would listen on {shown}, which is not a loopback address: set "
                    "AI_DOCK_TOKEN (the dock refuses to listen on the network without a token; "
                    "gunicorn's --bind and GUNICORN_CMD_ARGS are checked too)")
    return loopback


def token_ok(given: str | None, expected: str) -> bool:
    """Constant-time comparison of a presented token with ``AI_DOCK_TOKEN``."""
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def session_cookie_value(token: str) -> str:
    """The cookie value that proves the browser once presented the token.

    A keyed hash of a fixed label, so the cookie (visible to anyone reading the browser's
    storage) does not reveal the token itself; changing the token invalidates every cookie.
    """
    return hmac.new(token.encode("utf-8"), b"varaverk-dock-session-v1", hashlib.sha256).hexdigest()


def cookie_ok(cookie: str | None, token: str) -> bool:
    """Constant-time check of the session cookie against ``AI_DOCK_TOKEN``."""
    if not cookie or not token:
        return False
    return hmac.compare_digest(cookie.encode("ascii", "replace"),
                               session_cookie_value(token).encode("ascii"))


def _origin_of(url: str) -> str | None:
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        return None
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def same_origin(headers, host_url: str) -> tuple[bool, str]:
    """Whether a state-changing request comes from the dock's own origin.

    Args:
        headers: the request headers (a mapping with ``get``).
        host_url: this request's own origin as the server sees it, ``http://host:port/``.

    Returns:
        (allowed, reason). The browser's ``Sec-Fetch-Site`` is trusted first (``same-origin``
        or ``none``, a typed URL); then ``Origin``; then ``Referer``. A request carrying none of
        them is refused: every browser sends at least one on a POST or DELETE, and a tool
        outside the browser can add ``Origin`` itself.
    """
    own = _origin_of(host_url)
    site = (headers.get("Sec-Fetch-Site") or "").strip().lower()
    if site:
        if site in ("same-origin", "none"):
            return True, "sec-fetch-site"
        return False, f"cross-origin request refused (Sec-Fetch-Site: {site})"
    origin = (headers.get("Origin") or "").strip()
    if origin:
        if origin.lower() != "null" and _origin_of(origin) == own:
            return True, "origin"
        return False, "cross-origin request refused (Origin does not match)"
    referer = (headers.get("Referer") or "").strip()
    if referer:
        if _origin_of(referer) == own:
            return True, "referer"
        return False, "cross-origin request refused (Referer does not match)"
    return False, "state-changing request without Origin or Referer refused"


def host_allowed(host_header: str | None) -> bool:
    """Whether the ``Host`` header names a loopback address (DNS-rebinding guard)."""
    if not host_header:
        return False
    raw = host_header.strip()
    if raw.startswith("["):
        name = raw[1:].partition("]")[0]
    else:
        name = raw.rpartition(":")[0] if raw.count(":") == 1 else raw
    return is_loopback_host(name)


def valid_chat_id(chat_id: str | None) -> bool:
    """True when ``chat_id`` is a well-formed chat id (letters, digits, ``-``, ``_``; ≤ 128)."""
    return bool(chat_id) and CHAT_ID_RE.fullmatch(chat_id) is not None
