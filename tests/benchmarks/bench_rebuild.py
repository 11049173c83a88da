"""Benchmark: a full ``--force`` rebuild and an incremental refresh of harborlab against the
raw embedder time (on demand).

Raw: the offline embedder (already loaded) embeds exactly the chunk texts the rebuild embeds, in
one ``embed`` call. Rebuild: ``refresh(force=True)`` with that same loaded embedder
(listing, reading, chunking, embedding, one-transaction write). Embedding should dominate:
target rebuild <= 1.05x raw. Runs alternate (raw, rebuild, raw, rebuild...) and the best of
each is compared, so the shared machine's load hits both alike; CPU is measured as for the
incremental rounds below (``_timed``). Also prints the rebuild's phases and the wall time of
the ``ai-index --force`` subprocess (adds Python start-up and the model load).

Incremental: each round writes 12 one-chunk Markdown files with new text and commits them;
raw is the same embedder embedding exactly the 12 chunk texts the refresh then embeds, and the
refresh is ``refresh(settings, emb)`` (git listing, stats, reading, masking, chunking, token
counts, embedding, the write). Target: refresh <= 1.1x raw, in CPU time (this process and its
children: git). Every round measures its raw embedding and its refresh back to back, and the
figure is the median over rounds of each round's own ratio, so a load that moves the
embedder's CPU time between rounds (the shared machine's load does) moves both sides of a
ratio alike. Odd rounds refresh with the embedder (refresh / raw); even rounds refresh with
``Replay``, which answers the texts from the raw run's vectors, so the refresh's overhead is
measured without the embedder's noise ((raw + overhead) / raw, the steadier figure).

Each measurement starts when no other thread of this process runs and ends when none does
again (``settle``): onnxruntime's worker threads keep spinning for a while after an
inference returns, and that CPU belongs to the inference that left them spinning, not to
whatever is measured next (a refresh timed right after a raw embedding used to be charged
with the embedding's spin). Wall time is measured to the return.

    python -m tests.benchmarks.bench_rebuild [--rounds 2] [--incremental 9]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

from tests.benchmarks import settle
from tests.support.environ import environ_without_ai
from tests.support.repos import git, make_harborlab
from varaverk.index.refresh import refresh
from varaverk.documents import tracked_files
from varaverk.documents.chunking import chunk_document
from varaverk.config import Settings
from varaverk.embedding import make_embedder


NOTE = """# Nightly note {i}

Round {r}: the backup job {i} copies the pool snapshot to the offsite disk at 02:{i:02d}, waits
up to {w} seconds for the mover to stop, and mails the operator when the copy fails twice in a
row. Set BACKUP_{i}_RETRIES to change how often it tries again before giving up for the night.
"""


def chunk_texts(settings, emb, only: set[str] | None = None) -> list[str]:
    """The embed texts of every chunk a rebuild of ``settings.ai_repo_root`` stores (of the
    paths in ``only`` when given)."""
    listing = tracked_files.list_tracked(settings.ai_repo_root)
    matcher = tracked_files.KindMatcher.from_settings(settings)
    texts = []
    for entry in listing.entries:
        if only is not None and entry.path not in only:
            continue
        kind = matcher.kind_of(entry.path)
        if not kind:
            continue
        decoded = tracked_files.decode((listing.root / entry.path).read_bytes())
        if decoded.text is None:
            continue
        texts += [c.embed_text for c in chunk_document(entry.path, kind, decoded.text,
                                                       max_tokens=emb.max_tokens,
                                                       count_tokens=emb.count_tokens)]
    return texts


def _write_notes(repo, round_: int) -> set[str]:
    """Write and commit the 12 notes of round ``round_``; returns their paths."""
    paths = set()
    for i in range(12):
        path = f"Docs/Note-{i}.md"
        (repo / path).parent.mkdir(exist_ok=True)
        (repo / path).write_text(NOTE.format(i=i, r=round_, w=60 + round_ * 7 + i))
        paths.add(path)
    git(repo, "add", *sorted(paths))  # only them: the fixture keeps an untracked draft
    git(repo, "commit", "-q", "-m", f"notes, round {round_}")
    return paths


def _cpu() -> float:
    """CPU seconds of this process and its finished children (the refresh's git runs)."""
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                         resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _timed(fn):
    """``(fn(), wall seconds, CPU seconds)``: CPU from a settled start to settled again after
    the return (``settle``), wall to the return."""
    settle()
    t0, c0 = time.perf_counter(), _cpu()
    result = fn()
    wall = time.perf_counter() - t0
    settle()
    return result, wall, _cpu() - c0


class Replay:
    """``emb`` answering texts it embedded before from memory: a refresh with it costs
    everything but the embedding (its overhead), measured without the embedder's noise."""

    def __init__(self, emb, texts: list[str], result) -> None:
        self._emb, self._known = emb, dict(zip(texts, result.vectors))
        self.backend, self.model, self.batch_size = emb.backend, emb.model, emb.batch_size
        self.max_tokens, self.count_tokens = emb.max_tokens, emb.count_tokens

    def embed(self, texts):
        return type(self._emb.embed([]))(vectors=[self._known[t] for t in texts])


def incremental(settings, emb, rounds: int, first_round: int = 1) -> None:
    """Time ``rounds`` incremental refreshes of 12 one-chunk files against raw embedding of
    their 12 chunk texts, each round's two back to back; odd rounds refresh with the embedder,
    even rounds with ``Replay`` (the refresh's overhead alone). Prints the medians of the
    rounds' own ratios and their range. ``first_round`` numbers the notes' text (an index
    that saw these rounds would reuse their vectors)."""
    real, replayed = [], []  # per round: (raw wall, raw CPU, refresh wall, refresh CPU)
    refresh(settings, emb, progress=False)
    for round_ in range(first_round, first_round + 2 * rounds):
        paths = _write_notes(settings.ai_repo_root, round_)
        texts = chunk_texts(settings, emb, paths)
        assert len(texts) == 12, len(texts)
        result, raw_wall, raw_cpu = _timed(lambda: emb.embed(texts))
        assert not result.errors
        refresher = emb if round_ % 2 else Replay(emb, texts, result)
        report, wall, cpu = _timed(lambda: refresh(settings, refresher, progress=False))
        (real if round_ % 2 else replayed).append((raw_wall, raw_cpu, wall, cpu))
        assert report.chunks_embedded == 12 and report.indexed == 12, report.summary()
    print(f"incremental, 12 files x 1 chunk, {rounds} + {rounds} rounds, medians (range) "
          f"of each round's own figures; load average {os.getloadavg()[0]:.1f}")
    print(f"  raw embed {_ms(real + replayed, 0)} wall, {_ms(real + replayed, 1)} CPU; "
          f"refresh {_ms(real, 2)} wall, {_ms(real, 3)} CPU")
    print(f"  refresh / raw: {_ratio(real, lambda r: r[2] / r[0])} wall, "
          f"{_ratio(real, lambda r: r[3] / r[1])} CPU (target <= 1.1)")
    print(f"  the refresh without its embedding (Replay): {_ms(replayed, 2)} wall, "
          f"{_ms(replayed, 3)} CPU; (raw + that) / raw = "
          f"{_ratio(replayed, lambda r: (r[1] + r[3]) / r[1])} CPU, the steadier figure")


def _ms(rows: list[tuple], column: int) -> str:
    """The median of ``column`` (seconds) over ``rows`` in ms, with its range."""
    values = [r[column] * 1000 for r in rows]
    return f"{statistics.median(values):.0f} ms ({min(values):.0f}-{max(values):.0f})"


def _ratio(rows: list[tuple], ratio) -> str:
    """The median of ``ratio(row)`` over ``rows``, with its range."""
    values = [ratio(r) for r in rows]
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def rebuild(settings, emb, texts: list[str], rounds: int) -> None:
    """Time ``rounds`` forced rebuilds against raw embedding of their ``texts``, alternating;
    prints the best of each."""
    raw_times, rebuild_times, raw_cpu, rebuild_cpu, reports = [], [], [], [], []
    for _ in range(rounds):
        result, wall, cpu = _timed(lambda: emb.embed(texts))
        raw_times.append(wall)
        raw_cpu.append(cpu)
        assert not result.errors
        report, wall, cpu = _timed(lambda: refresh(settings, emb, force=True, progress=False))
        rebuild_times.append(wall)
        rebuild_cpu.append(cpu)
        reports.append(report)
        assert report.chunks_embedded == len(texts), (report.chunks_embedded, len(texts))
    raw, built = min(raw_times), min(rebuild_times)
    best = reports[rebuild_times.index(built)]
    print(f"raw embed     {raw:8.2f} s wall, {min(raw_cpu):8.2f} s CPU   (wall runs: "
          f"{', '.join(f'{t:.2f}' for t in raw_times)})")
    print(f"rebuild       {built:8.2f} s wall, {min(rebuild_cpu):8.2f} s CPU   (wall runs: "
          f"{', '.join(f'{t:.2f}' for t in rebuild_times)})")
    print("rebuild phases (best run): "
          + ", ".join(f"{k} {v:.2f} s" for k, v in best.timings.items()))
    share = best.timings.get("embed", 0.0) / max(best.seconds, 1e-9)
    print(f"rebuild / raw = {built / raw:.3f} wall, {min(rebuild_cpu) / min(raw_cpu):.3f} CPU "
          f"(target <= 1.05); embedding is {share:.1%} of the rebuild")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2,
                        help="rounds of the full rebuild (0: skip it)")
    parser.add_argument("--incremental", type=int, default=9, metavar="ROUNDS",
                        help="rounds of the incremental refresh (0: skip it)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        repo = make_harborlab(tmp / "harborlab")
        settings = Settings(ai_enabled=True, ai_repo_root=repo, ai_data_dir=tmp / "data",
                            ai_log_dir=tmp / "log", ai_embed_backend="local")
        emb = make_embedder(settings)
        texts = chunk_texts(settings, emb)
        emb.embed(texts[:8])  # load the model outside both timings
        print(f"harborlab: {len(texts)} chunks, offline embedder ({emb.model}, batch "
              f"{emb.batch_size}); load average {os.getloadavg()[0]:.1f}")
        if args.rounds:
            rebuild(settings, emb, texts, args.rounds)
        if args.incremental:
            incremental(settings, emb, args.incremental)
        if not args.rounds:
            return 0
        env = environ_without_ai()
        env.update(AI_ENABLED="true", AI_REPO_ROOT=str(repo), AI_DATA_DIR=str(tmp / "data"),
                   AI_LOG_DIR=str(tmp / "log"), AI_EMBED_BACKEND="local")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, str(ROOT / "Tools" / "varaverk_tools" / "ai_index.py"),
                        "--force", "-q"], env=env, check=True)
        print(f"ai-index --force subprocess: {time.perf_counter() - t0:.2f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
