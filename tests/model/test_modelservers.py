"""Choosing among AI_OLLAMA_HOSTS: first healthy wins, remembered briefly, clear failure."""

from __future__ import annotations

import threading

import pytest

from varaverk.modelservers import ModelServerUnavailable, forget, normalise_host, pick_ollama_host


def test_first_host_down_second_used(model_server, dead_url):
    assert pick_ollama_host([dead_url, model_server.base_url]) == model_server.base_url
    assert [r.path for r in model_server.requests] == ["/api/tags"]


def test_first_healthy_wins_in_order(model_server):
    from tests.support.model_server import ModelServer

    with ModelServer() as other:
        assert pick_ollama_host([model_server.base_url, other.base_url]) == model_server.base_url
        assert other.requests == []


def test_unhealthy_host_is_passed_over(model_server):
    from tests.support.model_server import ModelServer

    model_server.healthy = False
    with ModelServer() as other:
        assert pick_ollama_host([model_server.base_url, other.base_url]) == other.base_url


def test_choice_is_remembered_then_forgotten(model_server):
    hosts = [model_server.base_url]
    pick_ollama_host(hosts)
    pick_ollama_host(hosts)
    assert len(model_server.requests_to("/api/tags")) == 1
    forget(hosts)
    pick_ollama_host(hosts)
    assert len(model_server.requests_to("/api/tags")) == 2
    pick_ollama_host(hosts, ttl=0)
    assert len(model_server.requests_to("/api/tags")) == 3


def test_none_up_names_every_host_and_why(model_server, dead_url):
    model_server.healthy = False
    with pytest.raises(ModelServerUnavailable) as info:
        pick_ollama_host([dead_url, model_server.base_url])
    message = str(info.value)
    assert dead_url in message and "cannot connect" in message
    assert model_server.base_url in message and "HTTP 503" in message
    assert [h for h, _ in info.value.tried] == [dead_url, model_server.base_url]


def test_no_hosts_configured():
    with pytest.raises(ModelServerUnavailable, match="AI_OLLAMA_HOSTS is empty"):
        pick_ollama_host([" "])


def test_normalise_host():
    assert normalise_host("gpu-box:11434/") == "http://gpu-box:11434"
    assert normalise_host(" https://x ") == "https://x"


def _pick_from_threads(hosts, n):
    """``pick_ollama_host(hosts)`` from ``n`` threads released at once: [(host | error)]."""
    from concurrent.futures import ThreadPoolExecutor

    start = threading.Barrier(n)

    def pick(_):
        start.wait()
        try:
            return pick_ollama_host(hosts)
        except ModelServerUnavailable as exc:
            return exc

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(pick, range(n)))


def test_a_burst_of_requests_probes_a_busy_host_once(model_server):
    # Turns arriving together in one worker used to probe /api/tags once each; on a busy host
    # some of those probes missed their timeout and the turn failed as "unavailable".
    model_server.tags_delay = 0.3
    picks = _pick_from_threads([model_server.base_url], 12)
    assert picks == [model_server.base_url] * 12
    assert len(model_server.requests_to("/api/tags")) == 1


def test_a_burst_shares_one_failed_probe(model_server):
    model_server.healthy = False
    model_server.tags_delay = 0.3
    picks = _pick_from_threads([model_server.base_url], 8)
    assert all(isinstance(p, ModelServerUnavailable) and "HTTP 503" in str(p) for p in picks)
    assert len(model_server.requests_to("/api/tags")) == 1
    # a failure is not remembered: the next request probes again
    model_server.healthy = True
    assert pick_ollama_host([model_server.base_url]) == model_server.base_url
    assert len(model_server.requests_to("/api/tags")) == 2
