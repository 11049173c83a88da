"""Dock benchmarks (run on demand, never in the unit suite)::

    python -m tests.benchmarks.bench_dock [--rounds 30] [--streams 50]

1. Time to first token through the dock minus direct to the model server (target ≤ 30 ms):
   the same question streamed N times straight from the fake Ollama server's /api/chat, and N
   times through a real gunicorn dock's /api/ask (profile ``chat`` with no index, so the figure
   is the dock's and the worker's overhead, not retrieval); medians compared. The ``varaverk``
   profile (with retrieval over harborlab) is reported too, for information.
2. 50 concurrent streams through gunicorn (AI_DOCK_WORKERS=2, 32 threads each) on this
   machine's cores: every stream must end with ``done`` and ``saved``; reports errors, wall
   time and per-stream latency.

The fake model server runs in this process; the dock in its own process group.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx

from tests.dock.conftest import CHAT_MODEL, QUESTION, base_settings, start_dock
from tests.support.model_server import ModelServer
from tests.support.repos import make_harborlab


def _first_token_direct(server: ModelServer, question: str) -> float:
    body = {"model": CHAT_MODEL, "stream": True,
            "messages": [{"role": "user", "content": question}]}
    first = None
    t0 = time.perf_counter()
    with httpx.stream("POST", server.base_url + "/api/chat", json=body, timeout=30) as resp:
        for line in resp.iter_lines():
            if (first is None and line.strip()
                    and json.loads(line).get("message", {}).get("content")):
                first = time.perf_counter() - t0
    return first


def _ask(url: str, question: str, profile: str, client: httpx.Client | None = None
         ) -> tuple[float | None, float, list[str], dict]:
    """(time to first content event, total time, event types, the done event's timings) of
    one ask through the dock."""
    first = None
    timings: dict = {}
    kinds: list[str] = []
    t0 = time.perf_counter()
    stream = (client or httpx).stream
    with stream("POST", url + "/api/ask", json={"question": question, "profile": profile},
                headers={"Origin": url}, timeout=120) as resp:
        if resp.status_code != 200:
            return None, time.perf_counter() - t0, [f"http {resp.status_code}"], timings
        for line in resp.iter_lines():
            if not line.strip():
                continue
            event = json.loads(line)
            kind = event["type"]
            kinds.append(kind)
            if kind == "done":
                timings = event["data"].get("timings") or {}
            if kind == "content" and first is None:
                first = time.perf_counter() - t0
    return first, time.perf_counter() - t0, kinds, timings


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _ms(v: float) -> str:
    return f"{v * 1000:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--streams", type=int, default=50)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-dock-"))
    server = ModelServer().start()
    docks = []
    try:
        repo = make_harborlab(work / "harborlab")
        indexed = work / "indexed"
        settings = base_settings(repo, indexed, server)
        from varaverk.index.refresh import refresh
        refresh(settings, progress=False)

        # 1. time to first token
        plain = work / "plain"
        plain.mkdir()
        bare = start_dock(base_settings(repo, plain, server), plain)
        docks.append(bare)
        question = "Write one sentence about tidy cable management."
        with httpx.Client() as client:
            for _ in range(3):  # warm up: imports, connections, the worker's first turn
                _first_token_direct(server, question)
                _ask(bare.url, question, "chat", client)
            # Interleaved, so the load of a shared machine weighs on both sides alike.
            direct, dock = [], []
            for _ in range(args.rounds):
                direct.append(_first_token_direct(server, question))
                first, _, kinds, _ = _ask(bare.url, question, "chat", client)
                assert first is not None and kinds[-1] == "saved", kinds
                dock.append(first)
        bare.stop()

        full_dir = work / "full"
        full_dir.mkdir()
        shutil.copy2(settings.index_path, full_dir / "index.sqlite")
        full = start_dock(base_settings(repo, full_dir, server), full_dir)
        docks.append(full)
        with httpx.Client() as client:
            for _ in range(3):
                _ask(full.url, QUESTION, "varaverk", client)
            retrieving = [_ask(full.url, QUESTION, "varaverk", client)[0]
                          for _ in range(args.rounds)]

        d_med, k_med, r_med = (statistics.median(x) for x in (direct, dock, retrieving))
        print(f"time to first token over {args.rounds} rounds (median, p90):")
        print(f"  direct to the model server      {_ms(d_med)}  {_ms(_pct(direct, .9))}")
        print(f"  through the dock, chat profile  {_ms(k_med)}  {_ms(_pct(dock, .9))}")
        diffs = [k - d for k, d in zip(dock, direct)]
        print(f"  dock overhead (median diff)     {_ms(k_med - d_med)}   target <= 30 ms")
        print(f"  per-round difference            median {_ms(statistics.median(diffs))}, "
              f"min {_ms(min(diffs))}")
        print(f"  through the dock, varaverk      {_ms(r_med)}  {_ms(_pct(retrieving, .9))}"
              "   (includes query embedding and hybrid search)")

        # 2. concurrent streams
        server.delta_delay = 0.05  # ten deltas: about half a second of streaming each
        results: list = [None] * args.streams

        def one(i: int) -> None:
            try:
                results[i] = _ask(full.url, f"{QUESTION} (stream {i})", "varaverk")
            except Exception as exc:  # counted as an error below
                results[i] = exc

        threads = [threading.Thread(target=one, args=(i,)) for i in range(args.streams)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        ok = [r for r in results if isinstance(r, tuple) and r[2][-2:] == ["done", "saved"]]
        errors = [r if isinstance(r, Exception) else r[2][-1:] for r in results if r not in ok]
        totals = [r[1] for r in ok]
        firsts = [r[0] for r in ok]
        print(f"{args.streams} concurrent streams on {os.cpu_count()} cores "
              f"(2 gunicorn workers x 32 threads):")
        print(f"  completed {len(ok)}, errors {len(errors)} {errors[:3] if errors else ''}")
        print(f"  wall {wall:.2f} s; per stream total median {_ms(statistics.median(totals))}, "
              f"p90 {_ms(_pct(totals, .9))}; first token median "
              f"{_ms(statistics.median(firsts))}, p90 {_ms(_pct(firsts, .9))}")
        for key in ("retrieval_s", "first_token_s", "generation_s", "total_s"):
            values = [r[3][key] for r in ok if key in r[3]]
            if values:
                print(f"  worker {key:<14} median {_ms(statistics.median(values))}, "
                      f"p90 {_ms(_pct(values, .9))}")
    finally:
        for d in docks:
            d.stop()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
