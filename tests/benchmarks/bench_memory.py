"""Benchmark: memory recall latency at 10,000 triplets, embedder excluded.

Run on demand (not part of the unit suite)::

    python -m tests.benchmarks.bench_memory [--triplets 10000] [--facts 6] [--rounds 50]

A real memory file (``MemoryStore``) is filled with ``--triplets`` triplets of three turns
each, every triplet with ``--facts`` facts (random unit 384-d vectors, as all-MiniLM-L6-v2's
are unit length) and a recollection. The embedder is replaced by one returning precomputed
vectors, so the figure is recall without embedding: the new triplet's extractive digest, one
matrix product of its facts against every stored fact, the votes, and reading the recalled
triplets' turns, facts and recollections from SQLite (``varaverk.memory.recall.recall``), then
the prompt block. Median of ``--rounds`` recalls after a warm-up (the fact matrix is read once
per memory file and brought up to date after writes; the figure after 10 more triplets shows
that update). Target (issue 22): <= 20 ms at 10,000 triplets. Two floors are printed beside
it: one matrix-vector product, and the product of the new triplet's fact vectors (what recall
cannot avoid: every stored fact scored against every new fact).

The load average is printed with the figures: the host is shared, and load moves them.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from tests.benchmarks import load_average
from varaverk.embedding import EmbedResult
from varaverk.memory.digest import Digest, Fact
from varaverk.memory.prompt_block import memory_block
from varaverk.memory.recall import new_facts, recall
from varaverk.memory.store import MemoryStore

DIM = 384
WORDS = ("nas synology restic backup parity mover jellyfin transcoding pihole dns proxmox "
         "zigbee ups battery shutdown ntfy alert disk cache btrfs mirror offsite cloud").split()


class PrecomputedEmbedder:
    """Returns, at once, vectors near stored facts (a stored row plus noise, cosine about
    0.7), so recall finds and reads triplets: the benchmark leaves the embedder out."""

    backend, model = "local", "bench"

    def __init__(self, rng: np.random.Generator, stored: np.ndarray) -> None:
        self.rng, self.stored = rng, stored

    def embed(self, texts):
        rows = self.stored[self.rng.integers(0, len(self.stored), len(texts))]
        noise = self.rng.standard_normal(rows.shape).astype(np.float32) / np.sqrt(DIM)
        vecs = rows + noise
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        return EmbedResult(vectors=list(vecs.astype(np.float32)))  # as every embedder returns


def _sentence(rng: np.random.Generator, i: int) -> str:
    return f"Turn {i}: the " + " ".join(rng.choice(WORDS, 12)) + "."


def fill(store: MemoryStore, triplets: int, facts: int, rng: np.random.Generator,
         prefix: str = "c") -> None:
    """``triplets`` triplets of 3 turns in conversations of 21 turns (10 triplets each),
    named ``<prefix><n>``."""
    per_conversation = 10
    for c in range(triplets // per_conversation):
        turns = [{"speaker": r, "role": r, "said_at": f"2026-03-02T10:{i % 60:02d}:00",
                  "text": _sentence(rng, i)}
                 for i, r in zip(range(2 * per_conversation + 1), ["user", "assistant"] * 11)]
        store.add_turns(f"{prefix}{c}", turns)
        for t in range(per_conversation):
            vecs = rng.standard_normal((facts, DIM)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            digest = Digest([Fact(_sentence(rng, f), "user") for f in range(facts)],
                            "I remember " + _sentence(rng, t))
            store.write_digest(f"{prefix}{c}", 2 * t, 2 * t + 2, digest, vecs,
                               ("local", "bench", DIM), "digested")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--triplets", type=int, default=10_000)
    parser.add_argument("--facts", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    rng = np.random.default_rng(22)
    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore.open(Path(tmp) / "memory.db")
        started = time.perf_counter()
        fill(store, args.triplets, args.facts, rng)
        print(f"filled {args.triplets} triplets ({args.triplets * args.facts} facts) in "
              f"{time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        embedder = PrecomputedEmbedder(rng, store.fact_table().matrix)
        print("reading the fact matrix (once per process): "
              f"{(time.perf_counter() - started) * 1e3:.1f} ms")
        recent = store.turns("c0", 0, 1)
        question = "Why did I move the restic backups to the Synology NAS last March?"
        recall(store, embedder, question, recent, exclude="c0")
        times = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            recalled = recall(store, embedder, question, recent, exclude="c0")
            memory_block(recalled, 600)
            times.append((time.perf_counter() - started) * 1e3)
        print(f"recall + block at {args.triplets} triplets: median "
              f"{statistics.median(times):.1f} ms, p90 {sorted(times)[int(0.9 * len(times))]:.1f}"
              f" ms (target <= 20 ms); {len(recalled)} recalled; load {load_average()}")
        fill_one = MemoryStore.open(Path(tmp) / "memory.db")  # another store: the dock's next turn
        fill(fill_one, 10, args.facts, rng, prefix="new")
        fill_one.close()
        started = time.perf_counter()
        recall(store, embedder, question, recent, exclude="c0")
        print("recall after 10 more triplets were written (reads only the new facts): "
              f"{(time.perf_counter() - started) * 1e3:.1f} ms")
        matrix = store.fact_table().matrix
        queries = np.vstack(embedder.embed(new_facts(question, recent)).vectors)
        for label, product in (("one bare matrix-vector product", lambda: matrix @ matrix[0]),
                               (f"the bare product of the {len(queries)} new facts' vectors",
                                lambda: matrix @ queries.T)):
            times = []
            for _ in range(args.rounds):
                started = time.perf_counter()
                product()
                times.append((time.perf_counter() - started) * 1e3)
            print(f"for scale, {label} over the same facts: median "
                  f"{statistics.median(times):.1f} ms")
        store.close()


if __name__ == "__main__":
    main()
