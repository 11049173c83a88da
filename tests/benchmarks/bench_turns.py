"""Turn log benchmarks (run on demand, never in the unit suite)::

    python -m tests.benchmarks.bench_turns [--rounds 30] [--streams 50 100] [--tokens 20]

1. Time to first token through the turn log (POST /api/turns, then the turn's Server-Sent
   Events) against direct (the same turn streamed in the response of POST /api/ask), profile
   ``chat`` with no index so the figure is the transport's; interleaved rounds, medians and
   p95, and the fake model server straight for reference.
2. For each N in ``--streams``: N answers at once direct (one client each, for reference),
   then N turns at once through a real gunicorn dock (two workers),
   each followed by two clients from its start; AI_DOCK_MAX_TURNS = N and AI_DOCK_MAX_STREAMS
   = 2N so the caps do not refuse any. Reports the time from asking to the first token at
   each client (p50, p95), to the last event, refusals, and tokens lost or repeated: every
   client's events must be seq 1, 2, 3, ... with no gap or repeat and its content must equal
   the saved answer (must be 0).

The fake model server runs in a child process, the dock in its own process group.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import httpx

from tests.benchmarks.bench_dock import _ask, _first_token_direct, _ms, _pct
from tests.dock.conftest import base_settings, start_dock
from tests.support.model_server import ModelServer
from tests.support.repos import make_harborlab

QUESTION = "Write one sentence about tidy cable management."


def _start(url: str, question: str, client: httpx.Client | None = None) -> tuple[int, str]:
    resp = (client or httpx).post(url + "/api/turns", json={"question": question,
                                                            "profile": "chat"},
                                  headers={"Origin": url}, timeout=120)
    return resp.status_code, (resp.json().get("turn_id") or resp.json().get("error"))


def _follow(url: str, turn_id: str, t0: float, client: httpx.Client | None = None) -> dict:
    """One client following a turn: its events and when the first content and the end came."""
    events, first = [], None
    with (client or httpx).stream("GET", f"{url}/api/turns/{turn_id}/events",
                                  timeout=300) as resp:
        if resp.status_code != 200:
            return {"status": resp.status_code, "events": [], "first": None,
                    "total": time.perf_counter() - t0}
        for line in resp.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            events.append(event)
            if event["type"] == "content" and first is None:
                first = time.perf_counter() - t0
    return {"status": 200, "events": events, "first": first, "total": time.perf_counter() - t0}


def _via_turn_log(url: str, question: str, client: httpx.Client) -> float | None:
    t0 = time.perf_counter()
    status, turn_id = _start(url, question, client)
    assert status == 202, turn_id
    return _follow(url, turn_id, t0, client)["first"]


def _faults(run: dict) -> tuple[int, int]:
    """(events or tokens lost, repeated) of one client's run: seqs must run 1, 2, 3, ... and,
    for a completed turn, the content must be the saved answer."""
    events = run["events"]
    seqs = [e["seq"] for e in events]
    repeated = len(seqs) - len(set(seqs))
    lost = (max(seqs) - len(set(seqs))) if seqs else 0
    if not events or events[-1]["type"] not in ("saved", "error"):
        lost += 1  # the stream ended before the turn did
    done = [e for e in events if e["type"] == "done"]
    if not done:
        return lost, repeated
    # The saved answer is the streamed text without its outer white space.
    got = "".join(e["data"]["text"] for e in events if e["type"] == "content").strip()
    answer = done[0]["data"]["answer"]
    if got != answer:
        lost += 1 if len(got) < len(answer) else 0
        repeated += 1 if len(got) >= len(answer) else 0
    return lost, repeated


def time_to_first_token(url: str, server, rounds: int) -> None:
    with httpx.Client() as client:
        for _ in range(3):  # warm up: imports, connections, the workers' first turns
            _ask(url, QUESTION, "chat", client)
            _via_turn_log(url, QUESTION, client)
        model, direct, logged = [], [], []
        for _ in range(rounds):  # interleaved: a shared machine's load weighs on all alike
            model.append(_first_token_direct(server, QUESTION))
            first, _, kinds, _ = _ask(url, QUESTION, "chat", client)
            assert first is not None and kinds[-1] == "saved", kinds
            direct.append(first)
            logged.append(_via_turn_log(url, QUESTION, client))
    print(f"time to first token over {rounds} rounds (p50, p95):")
    for name, values in (("the model server itself", model), ("direct (/api/ask)", direct),
                         ("through the turn log", logged)):
        print(f"  {name:<26} {_ms(statistics.median(values))}  {_ms(_pct(values, .95))}")
    print(f"  turn log minus direct (p50)  "
          f"{_ms(statistics.median(logged) - statistics.median(direct))}")


def concurrent_turns(url: str, n: int) -> None:
    runs: list[list[dict]] = [[] for _ in range(n)]
    refused: list[str] = []
    accepted: list[float] = []

    def one(i: int) -> None:
        t0 = time.perf_counter()
        status, turn_id = _start(url, f"{QUESTION} ({i})")
        accepted.append(time.perf_counter() - t0)
        if status != 202:
            refused.append(f"{status} {turn_id}")
            return
        readers = [threading.Thread(target=lambda: runs[i].append(_follow(url, turn_id, t0)))
                   for _ in range(2)]
        for r in readers:
            r.start()
        for r in readers:
            r.join()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    clients = [run for per_turn in runs for run in per_turn]
    ok = [c for c in clients if c["status"] == 200 and c["first"] is not None]
    faults = [_faults(c) for c in clients if c["status"] == 200]
    lost, repeated = sum(f[0] for f in faults), sum(f[1] for f in faults)
    same = sum(1 for per_turn in runs if len(per_turn) == 2
               and per_turn[0]["events"] == per_turn[1]["events"])
    firsts, totals = [c["first"] for c in ok], [c["total"] for c in ok]
    errors = [c["events"][-1]["data"].get("kind") for c in clients
              if c["events"] and c["events"][-1]["type"] == "error"]
    print(f"{n} turns x 2 clients on {os.cpu_count()} cores (2 gunicorn workers), "
          f"wall {wall:.2f} s:")
    print(f"  client streams ending in a turn error {len(errors)} "
          f"{sorted(set(errors)) if errors else ''}")
    print(f"  turns refused {len(refused)} {refused[:2]}; streams refused "
          f"{sum(1 for c in clients if c['status'] != 200)}; clients with a token {len(ok)}"
          f" of {2 * n}; turns whose two clients saw identical events {same} of {n}")
    if ok:
        print(f"  first token p50 {_ms(statistics.median(firsts))}, p95 {_ms(_pct(firsts, .95))}"
              f"; last event p50 {_ms(statistics.median(totals))}, p95 "
              f"{_ms(_pct(totals, .95))}")
    print(f"  POST /api/turns answered p50 {_ms(statistics.median(accepted))}, p95 "
          f"{_ms(_pct(accepted, .95))}; first token in the worker (done timings) p50 "
          f"{_ms(statistics.median(_worker_first(runs)))}")
    print(f"  tokens lost {lost}, repeated {repeated} (must be 0)")


def _worker_first(runs: list[list[dict]]) -> list[float]:
    """Each completed turn's first token as the worker timed it (from the turn's start)."""
    out = []
    for per_turn in runs:
        done = [e for e in (per_turn[0]["events"] if per_turn else []) if e["type"] == "done"]
        if done and done[0]["data"]["timings"].get("first_token_s") is not None:
            out.append(done[0]["data"]["timings"]["first_token_s"])
    return out or [float("nan")]


def concurrent_direct(url: str, n: int) -> None:
    """The same N answers at once, each streamed in its own /api/ask response (one client)."""
    results: list = [None] * n

    def one(i: int) -> None:
        results[i] = _ask(url, f"{QUESTION} ({i})", "chat")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = [r for r in results if r[0] is not None and r[2][-1:] == ["saved"]]
    firsts, totals = [r[0] for r in ok], [r[1] for r in ok]
    print(f"{n} answers direct (/api/ask, one client each): completed {len(ok)} of {n}")
    if ok:
        print(f"  first token p50 {_ms(statistics.median(firsts))}, p95 {_ms(_pct(firsts, .95))}"
              f"; last event p50 {_ms(statistics.median(totals))}, p95 "
              f"{_ms(_pct(totals, .95))}")


def _serve(conn, tokens: int, delay: float) -> None:
    """The fake model server in a process of its own, so the clients' threads here do not
    slow its tokens down: every answer is ``tokens`` words, ``delay`` seconds apart."""
    server = ModelServer().start()
    # A hundred turns connect at once; the standard library's listen backlog of 5 would
    # refuse some under load (an "unavailable" error, not the dock's).
    server._httpd.socket.listen(1024)
    server.script(content=[f"word{i} " for i in range(tokens)])
    server.delta_delay = delay
    conn.send((server.base_url, server.openai_base_url))
    conn.recv()  # until the benchmark is over
    server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--streams", type=int, nargs="+", default=[50, 100])
    parser.add_argument("--tokens", type=int, default=20, help="tokens per answer")
    parser.add_argument("--delay", type=float, default=0.05, help="seconds between tokens")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-turns-"))
    ours, theirs = multiprocessing.Pipe()
    serving = multiprocessing.Process(target=_serve, args=(theirs, args.tokens, args.delay),
                                      daemon=True)
    serving.start()
    base_url, openai_url = ours.recv()
    server = SimpleNamespace(base_url=base_url, openai_base_url=openai_url)
    dock = None
    try:
        repo = make_harborlab(work / "harborlab")
        most = max(args.streams)
        data = work / "data"
        data.mkdir()
        # The OpenAI-compatible protocol: no health probe per host, so a burst of turns
        # measures the transport, not the probes of AI_OLLAMA_HOSTS timing out under load.
        settings = base_settings(repo, data, server, ai_dock_max_turns=most,
                                 ai_dock_max_streams=2 * most, ai_chat_history_max=10,
                                 ai_gen_backend="openai", ai_openai_base_url=openai_url)
        dock = start_dock(settings, data)
        print(f"each answer: {args.tokens} tokens, {args.delay * 1000:.0f} ms apart (the "
              "first one too)")
        time_to_first_token(dock.url, server, args.rounds)
        for n in args.streams:
            concurrent_direct(dock.url, n)
            concurrent_turns(dock.url, n)
    finally:
        if dock is not None:
            dock.stop()
        ours.send("stop")
        serving.join(timeout=10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
