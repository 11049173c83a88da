"""Benchmark: the first question after opening a large index, against a floor (on demand).

Run on demand (not part of the unit suite)::

    python -m tests.benchmarks.bench_opening [--sizes 100000,1000000] [--rounds 5]
        [--keep DIR] [--warm 50]

Per size, an index of n synthetic chunks (384-d unit vectors, 30-word texts, labelled like a
homelab's docs: file names, heading trails, titles) is written straight into a new index
file with SQL (the indexer would spend an hour embedding), then fresh processes are timed in
turn, floor and project interleaved, ``--rounds`` of each:

* **floor**: ``sqlite3`` + numpy read every vector (``SELECT vec FROM chunks ORDER BY id``)
  into one float32 matrix and take the top 5 of one matrix-vector product (``np.vecdot``, on
  one thread): what any answer over these vectors costs at least.
* **project**: ``Index.open`` (read-only) and a ``Retriever`` (made as ``ai-query`` makes
  its own) answering one hybrid question with the embedder replaced by a fixed query vector:
  the vector table, the per-row arrays, BM25 and the label field, fusion and ranking.

Each figure is measured inside the child from just before opening to just after the answer
(imports excluded: ``bench_refresh`` and ``ai-query``'s start-up are about those): CPU
seconds (steadier than wall time on a shared host; from a start where no other thread of
the child runs to an end where none does, ``settle``: OpenBLAS's pool spins after numpy's
import, which once charged both sides tens of ms) and wall seconds, medians over the rounds,
and memory per chunk: the resident set after the answer minus before opening (``steady``)
and the peak minus before opening (``peak``), in KB (1,000 bytes) per chunk. Targets (issue
25): project CPU ≤ 1.5× the floor, steady memory ≤ 2.0 KB per chunk at 1M.

``--warm N`` then asks N warm questions in each child (medians of wall ms): the project's
hybrid search beside two floors, dense scoring with top 5 alone (``bench_scoring``'s), and that plus
an FTS5 MATCH of the same question (the lexical half answered by SQLite alone). Target
(issue 25): hybrid ≤ 1.1× the numpy floor at 100k and 1M.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tests.benchmarks import load_average, settle

DIM = 384
KINDS = ("header", "readme", "manual", "template", "doc")
SECTIONS = ("Purpose", "Operational model", "Design principles › Locking",
            "Operational safeguards", "Configuration › Timeouts", "Runtime modes")
PER_FILE = 20
QUESTION = "How long is the snapshot timeout of the backup mover by default?"


def synthesise(path: Path, n: int) -> None:
    """An index of ``n`` chunks at ``path``, written with SQL in batches (schema by
    ``Index.open``; FTS5 kept in step by its triggers)."""
    from varaverk.index.store.index import Index

    Index.open(path).close()
    rng = np.random.default_rng(2)
    words = [f"w{i}" for i in range(3000)] + ["mover", "rsync", "snapshot", "timeout",
                                              "backup", "restore", "port", "cache"]
    pyrng = random.Random(3)
    conn = sqlite3.connect(path)
    columns = {r[1] for r in conn.execute("PRAGMA table_info(chunks)")}
    labelled = "label" in columns
    if labelled:
        from varaverk.index.store.labels import chunk_label
    conn.execute("BEGIN")
    batch = 20000
    for start in range(0, n, batch):
        m = rng.standard_normal((min(batch, n - start), DIM), dtype=np.float32)
        m /= np.linalg.norm(m, axis=1, keepdims=True)
        rows = []
        for j, vec in enumerate(m):
            i = start + j
            f = i // PER_FILE
            path_ = f"docs/{words[f % 97]}/{words[f % 3001]}-{f}-guide.md"
            section = SECTIONS[i % len(SECTIONS)]
            title = f"{pyrng.choice(words)} {pyrng.choice(words)} {i}"
            text = " ".join(pyrng.choice(words) for _ in range(30))
            row = [path_, KINDS[f % 5], section, title, i % PER_FILE * 5 + 1,
                   i % PER_FILE * 5 + 4, 0, text, f"{path_} › {section}", "{}",
                   vec.astype("<f4").tobytes(), "repo", ""]
            if labelled:
                row.append(chunk_label(path_, section, title))
            rows.append(row)
        names = ("path, kind, section, title, start_line, end_line, part, text, context, meta,"
                 " vec, source, keywords" + (", label" if labelled else ""))
        conn.executemany(f"INSERT INTO chunks ({names}) VALUES "
                         f"({','.join('?' * len(rows[0]))})", rows)
    files = (n + PER_FILE - 1) // PER_FILE
    conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", [
        ("embed_backend", "bench"), ("embed_model", "fixed"), ("embed_dimension", str(DIM)),
        ("generation", "1"), ("chunks", str(n)), ("files", str(files))])
    conn.execute("COMMIT")
    conn.close()


def _rss() -> int:
    """Resident set of this process now, bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def child(kind: str, path: str, warm: int = 0) -> dict:
    """Run one measured opening in this process: ``floor`` or ``project``; then, with
    ``warm``, that many warm questions (``WARM``): the floor times its matrix-vector product
    with top 5 and an FTS5 MATCH of each question (``Index.fts_search``, top 40), the project
    its hybrid search."""
    q = np.random.default_rng(4).standard_normal(DIM).astype(np.float32)
    q /= np.linalg.norm(q)
    if kind == "project":
        from varaverk.config import Settings
        from varaverk.index.store.index import Index
        from varaverk.retrieval.search import Retriever
        from tests.benchmarks.bench_scoring import FixedEmbedder
        settings = Settings(ai_data_dir=Path(path).parent)
    before = _rss()
    settle()    # OpenBLAS's pool spins for a while after numpy's import: charge neither side
    cpu, wall = time.process_time(), time.perf_counter()
    if kind == "floor":
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = conn.execute("SELECT vec FROM chunks ORDER BY id").fetchall()
        matrix = np.frombuffer(b"".join(r[0] for r in rows), dtype="<f4").reshape(-1, DIM)
        del rows
        scores = np.vecdot(matrix, q)   # one thread: no BLAS pool to wake and spin
        found = np.argpartition(-scores, 5)[:5].tolist()
    else:
        index = Index.open(path, readonly=True)
        retriever = Retriever(settings, index, FixedEmbedder(q))
        found = [h.chunk.id for h in retriever.search(QUESTION, 5)]
    wall = time.perf_counter() - wall
    settle()    # a thread the answer set running is the answer's CPU too
    cpu = time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out = {"cpu": cpu, "wall": wall, "steady": _rss() - before, "peak": peak - before,
           "found": len(found)}
    if warm:
        if kind == "floor":
            from varaverk.index.store.index import Index
            from varaverk.retrieval.scoring import dense_scores, top_k
            index = Index.open(path, readonly=True)
            # the dense floor as bench_scoring's: a BLAS matrix-vector product wakes its
            # thread pool every call, and under load costs several times this
            out["dense_ms"] = _median_ms(lambda i: top_k(dense_scores(matrix, q), 5), warm)
            out["match_ms"] = _median_ms(lambda i: index.fts_search(WARM[i % 3], 40), warm)
        else:
            out["hybrid_ms"] = _median_ms(lambda i: retriever.search(WARM[i % 3], 5), warm)
    return out


# The warm questions (``--warm``), asked in turn after the first (the steady state of a
# long-lived process; bench_scoring's "repeat words").
WARM = ("what stops rsync and the mover running at once",
        "How long is the snapshot timeout by default?",
        "Why does the backup restore port w17 use w2999?")


def _median_ms(fn, rounds: int) -> float:
    """Median wall ms of ``fn(i)`` over ``rounds`` calls after one warm-up call each of the
    three warm questions."""
    for i in range(3):
        fn(i)
    times = []
    for i in range(rounds):
        t = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def measure(kind: str, path: Path, warm: int = 0) -> dict:
    out = subprocess.run([sys.executable, "-m", "tests.benchmarks.bench_opening", "--child",
                          kind, str(path), str(warm)], check=True, capture_output=True,
                         text=True)
    return json.loads(out.stdout)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="100000")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--keep", type=Path, help="folder to keep (and reuse) the synthetic indexes")
    p.add_argument("--warm", type=int, default=0,
                   help="after the first question, time this many warm ones (and their floors)")
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], int(args.child[2]))))
        return 0
    print("| chunks | floor CPU s | project CPU s | ratio | floor wall s | project wall s |"
          " project KB/chunk steady, peak | floor KB/chunk steady, peak | load avg |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for n in [int(s) for s in args.sizes.split(",")]:
            path = folder / f"opening-{n}.sqlite"
            if not path.exists():
                t = time.perf_counter()
                synthesise(path, n)
                print(f"(index of {n} chunks written in {time.perf_counter() - t:.0f} s)",
                      flush=True)
            runs: dict[str, list[dict]] = {"floor": [], "project": []}
            for _ in range(args.rounds):
                for kind in runs:
                    runs[kind].append(measure(kind, path, args.warm))

            def med(kind: str, key: str) -> float:
                return statistics.median(r[key] for r in runs[kind])

            def kb(kind: str) -> str:
                return f"{med(kind, 'steady') / n / 1000:.2f}, {med(kind, 'peak') / n / 1000:.2f}"
            ratio = med("project", "cpu") / med("floor", "cpu")
            print(f"| {n} | {med('floor', 'cpu'):.2f} | {med('project', 'cpu'):.2f} |"
                  f" {ratio:.2f} (≤ 1.5: {'ok' if ratio <= 1.5 else 'MISSED'}) |"
                  f" {med('floor', 'wall'):.2f} | {med('project', 'wall'):.2f} | {kb('project')} |"
                  f" {kb('floor')} | {load_average()} |", flush=True)
            if args.warm:
                dense, match = med("floor", "dense_ms"), med("floor", "match_ms")
                hybrid = med("project", "hybrid_ms")
                print(f"|  warm hybrid at {n}: {hybrid:.2f} ms; floors: dense {dense:.2f} ms"
                      f" ({hybrid / dense:.2f}x), dense + FTS5 MATCH {dense + match:.2f} ms"
                      f" ({hybrid / (dense + match):.2f}x) |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
