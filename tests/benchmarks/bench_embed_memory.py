"""Benchmark: peak resident memory of the offline embedder on a batch of long chunks.

Run on demand (not part of the unit suite)::

    python -m tests.benchmarks.bench_embed_memory [--texts 128] [--budget 2048]

Embeds ``--texts`` chunks of about 300 words (cut to 256 tokens) as ``ai-index`` does
(``embed_all`` hands 64 texts per call; the local embedder runs ``--budget`` tokens at most in
one onnxruntime run, ``LOCAL_TOKENS_PER_RUN``; ``--budget 0`` runs each batch of 32 whole, as
before issue 21's memory fix) and prints the process's peak resident memory before and after,
with the CPU time. onnxruntime's arena keeps its largest run's tensors, so the peak follows the
largest run, not the number of chunks. Target: indexing holds under 700 MB resident.
"""

from __future__ import annotations

import argparse
import resource
import time

import varaverk.embedding as embedding


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--texts", type=int, default=128)
    parser.add_argument("--budget", type=int, default=embedding.LOCAL_TOKENS_PER_RUN)
    args = parser.parse_args()
    embedding.LOCAL_TOKENS_PER_RUN = args.budget or 32 * embedding.LOCAL_MAX_TOKENS
    emb = embedding.LocalEmbedder(batch_size=32)
    texts = [f"section {i}: " + " ".join(f"word{i}x{j}" for j in range(300))
             for i in range(args.texts)]
    emb.embed_query("warm up")  # the model loaded: its own memory is not the batch's
    loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    started = time.process_time()
    for start in range(0, len(texts), 64):
        emb.embed(texts[start:start + 64])
    cpu = time.process_time() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"{args.texts} texts of 256 tokens, {embedding.LOCAL_TOKENS_PER_RUN} tokens per run: "
          f"model loaded {loaded} MB, peak {peak} MB resident, {cpu:.1f} s CPU")


if __name__ == "__main__":
    main()
