"""Benchmark: peak memory and time of a full ``ai-index --force`` by repository size (on
demand).

A generated git repository of ``N`` one-chunk Markdown notes (each some 200 characters of
varied words) is indexed by the ``ai-index`` command as a subprocess, against the real test
model server (``tests.support.model_server``: deterministic 384-dimension vectors over HTTP,
so the figure is the pipeline's own memory, not an embedding model's). Printed per size: the
child's peak resident set (``ru_maxrss`` from ``wait4``), wall and CPU seconds (the child's;
the server runs in this process), and the chunks stored. Memory flat in the repository size is
the aim (issue 21/25: chunk, embed and write in bounded batches); the embedding server's time is
the same for every tree, so CPU compares the pipelines.

With ``--compare TREE`` (a checkout of another version, e.g. ``git archive main``) each size
runs both trees, interleaved (``--runs`` rounds), so the shared machine's load hits both alike.

    python -m tests.benchmarks.bench_index_memory [--files 5000 40000] [--runs 1]
        [--compare /tmp/main-tree]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.benchmarks import compare_env, load_average
from tests.support.environ import environ_without_ai
from tests.support.model_server import ModelServer
from tests.support.repos import git
from varaverk.index.store.location import index_file

ROOT = Path(__file__).resolve().parents[2]
ENTRY = Path("Tools") / "varaverk_tools" / "ai_index.py"
WORDS = ("nas synology restic backup parity mover jellyfin transcoding pihole dns proxmox "
         "zigbee ups battery shutdown ntfy alert disk cache btrfs mirror offsite cloud vlan "
         "router switch firewall wireguard tailscale grafana prometheus loki traefik caddy "
         "docker compose kubernetes talos cilium longhorn snapshot retention schedule").split()


def note(i: int) -> str:
    """The ``i``-th note: a heading and one paragraph of some 200 characters (one chunk within
    the Ollama backend's budget)."""
    words = [WORDS[(i * 7 + k * (i % 13 + 1)) % len(WORDS)] for k in range(24)]
    return f"# Note {i}\n\nHost h{i} runs " + " ".join(words) + f". Port {1000 + i % 60000}.\n"


def make_notes_repo(root: Path, count: int) -> Path:
    """A git repository of ``count`` notes under ``notes/`` (100 per folder), committed."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for i in range(count):
        folder = root / "notes" / f"d{i // 100:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"n{i}.md").write_text(note(i))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "notes")
    return root


def run_index(tree: Path, env: dict, repo: Path) -> tuple[float, float, float]:
    """``(peak resident MB, wall s, CPU s)`` of one ``ai-index --force -q`` child."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(tree / ENTRY), "--force", "-q"], env=env,
                            cwd=str(repo), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode:
        raise SystemExit(f"ai-index exited {proc.returncode}: {err[-2000:]}")
    return usage.ru_maxrss / 1024, wall, usage.ru_utime + usage.ru_stime


def stored_chunks(data: Path, repo: Path) -> int:
    """How many chunks the index of ``repo`` under ``data`` holds."""
    conn = sqlite3.connect(str(index_file(data, repo)))
    try:
        return conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    finally:
        conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, nargs="+", default=[5000, 40000],
                        help="repository sizes, in one-chunk notes")
    parser.add_argument("--runs", type=int, default=1, help="rounds per size and tree")
    parser.add_argument("--compare", type=Path, metavar="TREE",
                        help="another checkout to run beside this one, interleaved")
    args = parser.parse_args()
    trees = [("this", ROOT)] + ([("compare", args.compare.resolve())] if args.compare else [])
    print(f"load average {load_average()}")
    with tempfile.TemporaryDirectory() as tmp, ModelServer(default_dim=384) as server:
        for count in args.files:
            repo = make_notes_repo(Path(tmp) / f"notes{count}", count)
            for _ in range(args.runs):
                for name, tree in trees:
                    data = Path(tmp) / f"data-{count}-{name}"
                    env = environ_without_ai()
                    env.update(AI_ENABLED="true", AI_REPO_ROOT=str(repo), AI_DATA_DIR=str(data),
                               AI_LOG_DIR=str(Path(tmp) / "log"), AI_EMBED_BACKEND="ollama",
                               AI_EMBED_MODEL="all-minilm", AI_OLLAMA_HOSTS=server.base_url,
                               AI_EMBED_BATCH="64")
                    if tree != ROOT:
                        env = compare_env(env, tree)
                    server.requests.clear()
                    peak, wall, cpu = run_index(tree, env, repo)
                    print(f"{count:7d} files  {name:8s} peak {peak:7.1f} MB  wall {wall:7.1f} s"
                          f"  CPU {cpu:7.1f} s  chunks {stored_chunks(data, repo)}", flush=True)
    print(f"load average {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
