"""Benchmark: a full ``--force`` rebuild of harborlab against the raw embedder time (on demand).

Raw: the offline embedder (already loaded) embeds exactly the chunk texts the rebuild embeds, in
one ``embed`` call. Rebuild: ``refresh(force=True)`` with that same loaded embedder
(listing, reading, chunking, embedding, one-transaction write). Embedding should dominate:
target raw / rebuild ≥ 0.90. Runs alternate (raw, rebuild, raw, rebuild...) and the best of
each is compared, so the shared machine's load hits both alike. Also prints the rebuild's
phases and the wall time of the ``ai-index --force`` subprocess (adds Python start-up and the
model load).

    python -m tests.benchmarks.bench_rebuild [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

from tests.support.environ import environ_without_ai
from tests.support.repos import make_harborlab
from varaverk.index.refresh import refresh
from varaverk.documents import tracked_files
from varaverk.documents.chunking import chunk_document
from varaverk.config import Settings
from varaverk.embedding import make_embedder


def chunk_texts(settings, emb) -> list[str]:
    """The embed texts of every chunk a rebuild of ``settings.ai_repo_root`` stores."""
    listing = tracked_files.list_tracked(settings.ai_repo_root)
    matcher = tracked_files.KindMatcher.from_settings(settings)
    texts = []
    for entry in listing.entries:
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        repo = make_harborlab(tmp / "harborlab")
        settings = Settings(ai_enabled=True, ai_repo_root=repo, ai_data_dir=tmp / "data",
                            ai_log_dir=tmp / "log", ai_embed_backend="local")
        emb = make_embedder(settings)
        texts = chunk_texts(settings, emb)
        emb.embed(texts[:8])  # load the model outside both timings
        raw_times, rebuild_times, raw_cpu, rebuild_cpu, reports = [], [], [], [], []
        for _ in range(args.rounds):
            t0, c0 = time.perf_counter(), time.process_time()
            result = emb.embed(texts)
            raw_times.append(time.perf_counter() - t0)
            raw_cpu.append(time.process_time() - c0)
            assert not result.errors
            t0, c0 = time.perf_counter(), time.process_time()
            report = refresh(settings, emb, force=True, progress=False)
            rebuild_times.append(time.perf_counter() - t0)
            rebuild_cpu.append(time.process_time() - c0)
            reports.append(report)
            assert report.chunks_embedded == len(texts), (report.chunks_embedded, len(texts))
        raw, rebuild = min(raw_times), min(rebuild_times)
        best = reports[rebuild_times.index(rebuild)]
        print(f"harborlab: {best.indexed} files, {len(texts)} chunks, offline embedder "
              f"({emb.model}, batch {emb.batch_size}); load average {os.getloadavg()[0]:.1f}")
        print(f"raw embed     {raw:8.2f} s wall, {min(raw_cpu):8.2f} s CPU   (wall runs: "
              f"{', '.join(f'{t:.2f}' for t in raw_times)})")
        print(f"rebuild       {rebuild:8.2f} s wall, {min(rebuild_cpu):8.2f} s CPU   (wall runs: "
              f"{', '.join(f'{t:.2f}' for t in rebuild_times)})")
        print("rebuild phases (best run): "
              + ", ".join(f"{k} {v:.2f} s" for k, v in best.timings.items()))
        share = best.timings.get("embed", 0.0) / max(best.seconds, 1e-9)
        print(f"raw / rebuild = {raw / rebuild:.3f} wall, {min(raw_cpu) / min(rebuild_cpu):.3f} CPU; "
              f"embedding is {share:.1%} of the rebuild (target >= 90%)")
        env = environ_without_ai()
        env.update(AI_ENABLED="true", AI_REPO_ROOT=str(repo), AI_DATA_DIR=str(tmp / "data"),
                   AI_LOG_DIR=str(tmp / "log"), AI_EMBED_BACKEND="local")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, str(ROOT / "Tools" / "varaverk_tools" / "ai_index.py"), "--force", "-q"],
                       env=env, check=True)
        print(f"ai-index --force subprocess: {time.perf_counter() - t0:.2f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
