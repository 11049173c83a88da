"""Benchmark: chunking an 8 MiB chat export or note (run on demand).

Issue 21: parsers are linear in file size, and the largest document the indexer reads
(``tracked_files.MAX_DOCUMENT_BYTES``, 8 MiB) chunks in seconds. Each shape is made at 8 MiB
and at a quarter of that, and chunked with the offline embedder's tokenizer (what ``ai-index``
and ``--dry-run`` count with) and with the character counter (remote backends): the figures are
CPU seconds of this process (steadier than wall time on a shared machine), MB/s, and the ratio
of the two sizes' times (linear: about 4).

Shapes: a JSON chat export, a WhatsApp export (with pasted multi-line logs), a Markdown note
(headings, paragraphs, lists, code, one-line tables) and an org note with drawers.

    python -m tests.benchmarks.bench_parsers [--size-mib 8] [--shapes json,whatsapp,...]
"""

from __future__ import annotations

import argparse
import json
import random
import time

from varaverk.documents.chunking import chunk_document

WORDS = ("backup restic nas snapshot offsite prune retention disk pool zfs scrub docker "
         "compose traefik certificate renew dns pihole unbound vlan switch firewall rule "
         "port forward wireguard peer key rotate cron nightly weekly monthly log rotate "
         "alert mail ups battery shutdown grace period").split()


def _sentence(rnd: random.Random, n: int) -> str:
    return " ".join(rnd.choice(WORDS) for _ in range(n)).capitalize() + "."


def json_chat(size: int, rnd: random.Random) -> str:
    items, total, i = [], 0, 0
    while total < size:
        item = {"chat": f"Ops {i // 5000}", "sender": rnd.choice(["Anna", "Ben", "Cleo"]),
                "timestamp": f"2024-{1 + i // 40000 % 12:02d}-{1 + i // 1440 % 28:02d}T"
                             f"{i // 60 % 24:02d}:{i % 60:02d}:00",
                "text": _sentence(rnd, rnd.randint(3, 40))}
        items.append(item)
        total += len(json.dumps(item)) + 3
        i += 1
    return json.dumps(items, indent=1)


def whatsapp(size: int, rnd: random.Random) -> str:
    out, total, i = [], 0, 0
    while total < size:
        when = f"[{1 + i // 1440 % 28:02d}/03/2024, {i // 60 % 24:02d}:{i % 60:02d}:00]"
        if i % 500 == 499:  # a pasted log of a few hundred lines
            body = "the log:\n" + "\n".join(
                f"Mar  2 19:{k % 60:02d} nas restic[{k}]: snapshot {k:08x} saved"
                for k in range(rnd.randint(50, 400)))
        else:
            body = _sentence(rnd, rnd.randint(2, 30))
        line = f"{when} {rnd.choice(['Anna', 'Ben', 'Cleo'])}: {body}"
        out.append(line)
        total += len(line) + 1
        i += 1
    return "\n".join(out) + "\n"


def markdown(size: int, rnd: random.Random) -> str:
    out, total, i = ["---", "title: Homelab notes", "tags: [homelab, backup]", "---"], 0, 0
    while total < size:
        part = [f"{'#' * (1 + i % 3)} {_sentence(rnd, 3)[:-1]} {i}", "",
                _sentence(rnd, rnd.randint(20, 120)), ""]
        if i % 4 == 0:
            part += [f"- {_sentence(rnd, 6)}" for _ in range(5)] + [""]
        if i % 7 == 0:
            part += ["```bash", *(f"restic backup /srv/{w}" for w in WORDS[:8]), "```", ""]
        if i % 50 == 0:  # a table written on one long line
            part += ["| " + " | ".join(_sentence(rnd, 4) for _ in range(300)) + " |", ""]
        out.extend(part)
        total += sum(len(p) + 1 for p in part)
        i += 1
    return "\n".join(out) + "\n"


def org(size: int, rnd: random.Random) -> str:
    out, total, i = ["#+title: Homelab", "#+filetags: :homelab:"], 0, 0
    while total < size:
        part = [f"{'*' * (1 + i % 3)} TODO {_sentence(rnd, 3)[:-1]} {i} :ops:",
                ":PROPERTIES:", f":ID: {i:08x}", ":END:", _sentence(rnd, rnd.randint(20, 120)),
                "#+begin_src sh", "restic check", "#+end_src", ""]
        out.extend(part)
        total += sum(len(p) + 1 for p in part)
        i += 1
    return "\n".join(out) + "\n"


SHAPES = {"json": (json_chat, "chat", "chats:export.json"),
          "whatsapp": (whatsapp, "chat", "chats:WhatsApp Chat with Ops.txt"),
          "markdown": (markdown, "note", "vault:Homelab.md"),
          "org": (org, "org", "roam:homelab.org")}


def _cpu(path: str, kind: str, text: str, count) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, chunks) of one chunking."""
    cpu, wall = time.process_time(), time.perf_counter()
    chunks = chunk_document(path, kind, text, max_tokens=256, count_tokens=count)
    return time.process_time() - cpu, time.perf_counter() - wall, len(chunks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=float, default=8.0)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    args = parser.parse_args(argv)
    from varaverk.embedding import LocalEmbedder

    counters = {"tokenizer": LocalEmbedder().count_tokens, "chars": None}
    counters["tokenizer"]("warm up")
    size = int(args.size_mib * (1 << 20))
    print(f"{'shape':<9} {'counter':<9} {'MiB':>5} {'chunks':>7} {'cpu s':>7} {'wall s':>7} "
          f"{'MB/s':>6} {'x4 ratio':>8}")
    for name in args.shapes.split(","):
        make, kind, path = SHAPES[name]
        large = make(size, random.Random(21))
        small = make(size // 4, random.Random(21))
        for counter, count in counters.items():
            t_small = _cpu(path, kind, small, count)[0]
            cpu, wall, chunks = _cpu(path, kind, large, count)
            print(f"{name:<9} {counter:<9} {len(large) / (1 << 20):>5.1f} {chunks:>7} "
                  f"{cpu:>7.1f} {wall:>7.1f} {len(large) / cpu / 1e6:>6.2f} "
                  f"{cpu / max(t_small, 1e-3):>8.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
