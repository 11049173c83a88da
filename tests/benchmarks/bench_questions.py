"""Benchmark: query latency on real questions over real indexes, embedder excluded.

Run on demand (not part of the unit suite)::

    python -m tests.benchmarks.bench_questions QA.jsonl=INDEX.sqlite [...] [--rounds 10]

``bench_scoring`` times three short questions over a synthetic index; real questions are
longer (more words to route, look up and score) and real chunks vary in size, so this runs a
question set (``ai-eval``'s JSONL: one ``{"question": ...}`` per line) over an index that
``ai-index`` or ``ai-eval --data-dir`` built, e.g.
``synapse-qa-dev.jsonl=DATA/repo-synapse/index.sqlite``. Every question is
embedded once first (with the configured embedder, which must be the index's), so the figures
are ``Retriever.search`` (k = 5) alone, with a retriever made as the dock makes its own
(``preload=True``): per corpus the median of the first pass (each question's words new to the
retriever) and the median and 90th percentile over ``--rounds`` more passes through the
questions, in milliseconds, with the load average (the host may be shared, and load moves
them).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from tests.benchmarks import load_average
from varaverk.config import load_settings
from varaverk.embedding import make_embedder
from varaverk.retrieval.options import RetrieverOptions
from varaverk.retrieval.search import Retriever
from varaverk.index.store.index import Index


class PrecomputedEmbedder:
    """The configured embedder's query vectors, computed before timing starts."""

    def __init__(self, embedder, questions: list[str]) -> None:
        self.backend, self.model = embedder.backend, embedder.model
        self.dimension = embedder.dimension
        self.vectors = {q: np.asarray(embedder.embed_query(q), dtype=np.float32)
                        for q in questions}

    def embed_query(self, text: str) -> np.ndarray:
        return self.vectors[text]


def time_questions(index_path: Path, questions: list[str], rounds: int, settings,
                   embedder) -> tuple[int, list[float], list[float]]:
    """(chunks in the index, the first pass's search times, every later search's time), ms.
    The first search of all, which reads the index, is timed in neither."""
    index = Index.open(index_path, readonly=True)
    try:
        retriever = Retriever(settings, index, PrecomputedEmbedder(embedder, questions),
                              options=RetrieverOptions.from_settings(settings, preload=True))
        retriever.search(questions[0], 5)
        first = timed(retriever, questions[1:])
        later = [ms for _ in range(rounds) for ms in timed(retriever, questions)]
        return int(index.vector_table().matrix.shape[0]), first, later
    finally:
        index.close()


def timed(retriever: Retriever, questions: list[str]) -> list[float]:
    """Each question's ``search`` wall time in ms, in order."""
    times = []
    for q in questions:
        t = time.perf_counter()
        retriever.search(q, 5)
        times.append((time.perf_counter() - t) * 1000)
    return times


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("pairs", nargs="+", metavar="QA.jsonl=INDEX.sqlite")
    p.add_argument("--rounds", type=int, default=10, help="passes through each question set")
    args = p.parse_args(argv)
    corpora = []
    for pair in args.pairs:
        qa, sep, index_path = pair.partition("=")
        if not sep or not Path(qa).is_file() or not Path(index_path).is_file():
            p.error(f"{pair}: expected an existing QA.jsonl=INDEX.sqlite pair")
        corpora.append((Path(qa), Path(index_path)))
    settings = load_settings()
    embedder = make_embedder(settings)
    print("| corpus | chunks | questions | first pass, median ms | median ms | p90 ms | load avg |")
    print("|---|---|---|---|---|---|---|")
    for qa, index_path in corpora:
        questions = [json.loads(line)["question"] for line in qa.open(encoding="utf-8")
                     if line.strip()]
        chunks, first, times = time_questions(index_path, questions, args.rounds, settings,
                                              embedder)
        median, p90 = np.percentile(times, [50, 90])
        print(f"| {qa.stem} | {chunks} | {len(questions)} | {np.median(first):.2f} |"
              f" {median:.2f} | {p90:.2f} | {load_average()} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
