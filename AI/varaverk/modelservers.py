"""Choosing an Ollama host: the first healthy one of ``AI_OLLAMA_HOSTS`` wins, remembered briefly.

A homelab often has a GPU box reachable over the mesh and the local machine as a fallback.
``pick_ollama_host`` tries the hosts in the configured order with a cheap ``GET /api/tags`` and a
short timeout, and remembers the winner in this process for ``ttl`` seconds so every request does
not pay for a health check. When the chosen host then fails to connect, callers ``forget`` the
choice and pick again.

Requests that need a choice at the same moment (a burst of turns in one dock worker) share one
probe: the first probes while the others wait for its outcome, success or failure. Each probe
of its own would add load to a host that is busy answering, and could miss its timeout there.
"""

from __future__ import annotations

import threading
import time
from typing import Sequence

import httpx

from varaverk import bounded_http, exitcodes
from varaverk.errors import VaraverkError

HEALTH_TIMEOUT = 2.0   # seconds per host for the /api/tags probe
CHOICE_TTL = 60.0      # seconds a healthy choice is remembered

_lock = threading.Lock()
_chosen: dict[tuple[str, ...], tuple[str, float]] = {}
# Per host list: held while its probe runs; the outcome the waiters then share, with its time.
_probing: dict[tuple[str, ...], threading.Lock] = {}
_outcome: dict[tuple[str, ...], tuple[str | ModelServerUnavailable, float]] = {}


class ModelServerUnavailable(VaraverkError):
    """No configured model server answered. ``tried`` holds (host, reason) for each host."""

    exit_code = exitcodes.UNAVAILABLE
    kind = "unavailable"

    def __init__(self, message: str, tried: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.tried = list(tried)


def normalise_host(host: str) -> str:
    """``gpu-box:11434`` → ``http://gpu-box:11434``; trailing slashes dropped."""
    host = host.strip().rstrip("/")
    if "://" not in host:
        host = "http://" + host
    return host


def _probe(client: httpx.Client, host: str, timeout: float) -> str | None:
    """None when ``host`` answers ``GET /api/tags`` with 200, else the reason it is not healthy.

    Only the status is read, within ``timeout`` seconds in all (``varaverk.bounded_http``):
    the body is never read, so neither a trickle nor an endless body can hold the choice.
    """
    try:
        with bounded_http.stream(client, "GET", host + "/api/tags", deadline=timeout,
                                 max_bytes=0) as response:
            status = response.status_code
    except httpx.ConnectError as exc:
        return f"cannot connect ({exc})"
    except (httpx.TimeoutException, bounded_http.DeadlineExceeded):
        return f"no answer within {timeout:g} s"
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    if status != 200:
        return f"HTTP {status} from /api/tags"
    return None


def pick_ollama_host(hosts: Sequence[str], *, timeout: float = HEALTH_TIMEOUT,
                     ttl: float = CHOICE_TTL, client: httpx.Client | None = None) -> str:
    """The base URL of the first healthy Ollama host in ``hosts`` (in order).

    Args:
        hosts: base URLs such as ``http://gpu-box:11434`` (``AI_OLLAMA_HOSTS``, already split).
        timeout: seconds allowed per health probe.
        ttl: seconds a choice is reused without probing again (0 disables the memory).
        client: an httpx client to probe with (a short-lived one by default).

    Returns the normalised base URL without a trailing slash.
    Raises ModelServerUnavailable naming every host tried and why it was passed over, or saying
    that no host is configured.
    """
    key = tuple(normalise_host(h) for h in hosts if h.strip())
    if not key:
        raise ModelServerUnavailable("no Ollama host configured (AI_OLLAMA_HOSTS is empty)")
    asked = time.monotonic()
    with _lock:
        remembered = _chosen.get(key)
        probing = _probing.setdefault(key, threading.Lock())
    if remembered and ttl > 0 and asked - remembered[1] < ttl:
        return remembered[0]
    with probing:
        with _lock:
            shared = _outcome.get(key)
        if shared is None or shared[1] < asked:
            shared = (_probe_in_order(key, timeout, client), time.monotonic())
            with _lock:
                _outcome[key] = shared
                if isinstance(shared[0], str):
                    _chosen[key] = (shared[0], shared[1])
    if isinstance(shared[0], ModelServerUnavailable):
        failed = shared[0]  # a fresh error per caller: threads never share a traceback
        raise ModelServerUnavailable(str(failed), failed.tried)
    return shared[0]


def _probe_in_order(key: tuple[str, ...], timeout: float,
                    client: httpx.Client | None) -> str | ModelServerUnavailable:
    """The first host of ``key`` whose probe succeeds, or the error naming every host tried."""
    tried: list[tuple[str, str]] = []
    probe_client = client or httpx.Client()
    try:
        for host in key:
            reason = _probe(probe_client, host, timeout)
            if reason is None:
                return host
            tried.append((host, reason))
    finally:
        if client is None:
            probe_client.close()
    detail = "; ".join(f"{host}: {reason}" for host, reason in tried)
    return ModelServerUnavailable(f"no healthy Ollama host (tried {detail})", tried)


def forget(hosts: Sequence[str] | None = None) -> None:
    """Drop the remembered choice for ``hosts`` (all choices when None), e.g. after it failed."""
    with _lock:
        if hosts is None:
            _chosen.clear()
            _outcome.clear()
        else:
            key = tuple(normalise_host(h) for h in hosts if h.strip())
            _chosen.pop(key, None)
            _outcome.pop(key, None)
