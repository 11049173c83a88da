"""Benchmark: masking of tracked documents (``mask_secrets``), in MB of text per CPU second.

Every text file of the harborlab fixture and, when the developers' shared folder is there, of
the third-party corpora (Frigate, Synapse, pi-cluster docs, the TIL notes), each masked as the
kind the indexer would give it; then one document of 8 MiB made of those notes (a large notes
export). Masking runs before every chunking of a changed document, so it must not be what an
8 MiB note waits for: target at least 1 MB/s on the corpora and the 8 MiB note in seconds.

    python -m tests.benchmarks.bench_masking [--runs 3]
"""

from __future__ import annotations

import argparse
import time

from tests.support.repos import harborlab_files, shared_files
from varaverk.masking.documents import mask_secrets
from varaverk.masking.shapes import token_shapes

PROSE = (".md", ".rst", ".ronn", ".org", ".txt")
CORPORA = ("fixtures/frigate-docs", "fixtures/synapse-docs", "fixtures/picluster-docs",
           "fixtures/til-notes")


def documents() -> list[tuple[str, str]]:
    """``(kind, text)`` of every decodable text file of the corpora at hand."""
    docs = []
    for name, data in harborlab_files().items():
        try:
            docs.append(("doc" if name.endswith(PROSE) else "template", data.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    for rel in CORPORA:
        for path in shared_files(rel):
            try:
                text = path.read_text("utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            docs.append(("doc" if path.suffix in PROSE else "template", text))
    return docs


def cpu_seconds(fn, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    token_shapes(True)  # compiled once per process, as in a real run
    docs = documents()
    size = sum(len(t) for _, t in docs) / 1e6
    took = cpu_seconds(lambda: [mask_secrets(t, k) for k, t in docs], args.runs)
    print(f"corpora: {len(docs)} documents, {size:.1f} MB in {took:.2f} s CPU "
          f"= {size / took:.2f} MB/s")
    notes = "\n".join(t for k, t in docs if k == "doc")
    big = (notes * (8 * 2**20 // max(len(notes), 1) + 1))[:8 * 2**20]
    took = cpu_seconds(lambda: mask_secrets(big, "note"), 1)
    print(f"one 8 MiB note: {took:.2f} s CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
