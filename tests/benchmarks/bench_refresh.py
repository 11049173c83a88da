"""Benchmark: a no-op ``ai-index`` refresh of harborlab against the floor (run on demand).

The floor is what any refresh must do at least: start Python (``python -c``), run
``git ls-files -z`` and ``lstat`` every tracked path. The no-op refresh adds loading the
settings, one SQLite read and the repository's fingerprint (``varaverk.index.fingerprint``,
recorded by the first, full, warm-up run). Target: ≤ 1.25× the floor. The floor pays for the
interpreter's ``site`` as installed: an editable install's finder (setuptools) imports pathlib,
re and urllib.parse there, so run this with a ``pip install .`` interpreter as well to see what
a user's installation gives.

The index is built first with the fake model server (the backend never matters to a no-op run,
which never builds an embedder; the server is stopped before timing to prove it). Use
``--local`` to build it with the offline embedder instead (slower). ``--sources`` adds a second
index of harborlab plus three ``AI_SOURCES`` (the tests' vault, org-roam folder and chats) and
times its no-op refresh beside the one-source run: three more ``git ls-files`` and their stats.
``--summaries`` makes every file's extractive summary first, then times the no-op refresh with
``AI_SUMMARIES=extractive`` and an ``ai-index --summaries`` run that finds nothing to summarise.

    python -m tests.benchmarks.bench_refresh [--runs 30] [--local] [--sources] [--summaries]
        [--compare TREE]

``--compare TREE`` also times the no-op refresh of another checkout of the project (``git
archive main | tar -x -C TREE``) on an index of its own (its chunkers' stamp may differ, and two
trees sharing one index would re-chunk it in turn), interleaved: a before/after under one load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

from tests.benchmarks import compare_env, timed_runs
from tests.support.repos import make_harborlab

FLOOR = """
import os, subprocess
out = subprocess.run(["git", "ls-files", "-z"], capture_output=True, check=True).stdout
for p in out.split(b"\\0"):
    if p:
        try:
            os.lstat(p)
        except OSError:
            pass
"""
HEAVY = ("numpy", "onnxruntime", "httpx", "tokenizers", "markdown_it", "tqdm", "filelock",
         "wcmatch", "varaverk.embedding", "varaverk.documents.chunking")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--local", action="store_true", help="build with the offline embedder")
    parser.add_argument("--compare", type=Path, metavar="TREE",
                        help="also time the no-op refresh of this other checkout, interleaved")
    parser.add_argument("--sources", action="store_true",
                        help="also time a no-op refresh with three notes and chats sources")
    parser.add_argument("--summaries", action="store_true",
                        help="also time the no-op refresh and summary pass with summaries on")
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        repo = make_harborlab(tmp / "harborlab")
        # Measure as deployed: with bytecode caches (this sandbox sets PYTHONDONTWRITEBYTECODE).
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("AI_") and k != "PYTHONDONTWRITEBYTECODE"}
        subprocess.run([py, "-m", "compileall", "-q", str(ROOT / "AI")], check=True)
        env.update(AI_ENABLED="true", AI_REPO_ROOT=str(repo), AI_DATA_DIR=str(tmp / "data"),
                   AI_LOG_DIR=str(tmp / "log"))
        server = None
        if not args.local:
            from tests.support.model_server import ModelServer
            server = ModelServer().start()
            env.update(AI_EMBED_BACKEND="ollama", AI_EMBED_MODEL="all-minilm",
                       AI_OLLAMA_HOSTS=server.base_url)
        t0 = time.perf_counter()
        subprocess.run([py, str(ROOT / "Tools" / "varaverk_tools" / "ai_index.py"), "-q"], env=env, cwd=repo, check=True)
        print(f"built the index in {time.perf_counter() - t0:.1f} s "
              f"({'offline embedder' if args.local else 'fake Ollama server'})")
        env3 = None
        if args.sources:
            from tests.notes.corpus import make_notes_sources, sources_value
            env3 = dict(env, AI_DATA_DIR=str(tmp / "data3"),
                        AI_SOURCES=" ".join(sources_value(make_notes_sources(tmp / "notes"))))
            subprocess.run([py, str(ROOT / "Tools" / "varaverk_tools" / "ai_index.py"), "-q"], env=env3, cwd=repo,
                           check=True)
        env_s = dict(env, AI_SUMMARIES="extractive")
        if args.summaries:
            subprocess.run([py, str(ROOT / "Tools" / "varaverk_tools" / "ai_index.py"), "-q",
                            "--summaries"], env=env_s, cwd=repo, check=True)
        env_c = None
        if args.compare is not None:  # its own index: its chunkers' stamp may differ from ours
            tree = args.compare.resolve()
            env_c = compare_env(dict(env, AI_DATA_DIR=str(tmp / "data-compare")), tree)
            subprocess.run([py, str(tree / "Tools" / "varaverk_tools" / "ai_index.py"), "-q"],
                           env=env_c, cwd=repo, check=True)
        if server is not None:
            server.stop()  # a no-op run must not need it

        probe = ("import sys\nfrom varaverk_tools.ai_index import main\nrc = main(['-q'])\n"
                 f"print(sorted(m for m in sys.modules if m in {HEAVY!r} or "
                 "m.split('.')[0] in {'numpy', 'onnxruntime', 'httpx', 'tokenizers'}))")
        heavy = subprocess.run([py, "-c", probe], env=env, cwd=repo, capture_output=True,
                               text=True, check=True).stdout.strip()
        print(f"heavy modules imported by a no-op run: {heavy}")

        conf = tmp / "master.conf"
        conf.write_text("AI_TOP_K=5\nAI_GEN_MODEL=qwen2.5:3b\n")
        cmds = {
            "floor (python -c + git ls-files -z + lstat)": ([py, "-c", FLOOR], env),
            "python Tools/varaverk_tools/ai_index.py (no-op)": ([py, str(ROOT / "Tools" / "varaverk_tools" / "ai_index.py"), "-q"], env),
            "ai-index console script (no-op)": ([str(Path(py).parent / "ai-index"), "-q"], env),
            "ai-index --config (two keys, no-op)": (
                [str(Path(py).parent / "ai-index"), "-q", "--config", str(conf)], env),
        }
        if env_c is not None:
            cmds["no-op of the --compare tree"] = (
                [py, str(args.compare.resolve() / "Tools" / "varaverk_tools" / "ai_index.py"),
                 "-q"], env_c)
        if env3 is not None:
            cmds["python Tools/varaverk_tools/ai_index.py (no-op, 3 more sources)"] = (
                [py, str(ROOT / "Tools" / "varaverk_tools" / "ai_index.py"), "-q"], env3)
        if args.summaries:
            entry = str(ROOT / "Tools" / "varaverk_tools" / "ai_index.py")
            cmds["ai_index.py (no-op, AI_SUMMARIES=extractive)"] = ([py, entry, "-q"], env_s)
            cmds["ai_index.py --summaries (nothing to do)"] = ([py, entry, "-q", "--summaries"],
                                                              env_s)
        for cmd, cmd_env in cmds.values():  # warm the page cache and .pyc files
            timed_runs(cmd, cmd_env, repo, 2)
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in cmds}
        for _ in range(args.runs):  # interleaved, so load changes hit every command alike
            for name, (cmd, cmd_env) in cmds.items():
                samples[name] += timed_runs(cmd, cmd_env, repo, 1)
        first = samples[next(iter(cmds))]
        floor_wall = statistics.median(w for w, _ in first)
        floor_cpu = statistics.median(c for _, c in first)
        print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        print(f"{'command':<48} {'wall ms':>8} {'min':>6} {'ratio':>6} {'cpu ms':>7} {'ratio':>6}")
        for name, runs in samples.items():
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            print(f"{name:<48} {wall * 1000:>8.1f} {min(w for w, _ in runs) * 1000:>6.1f} "
                  f"{wall / floor_wall:>6.2f} {cpu * 1000:>7.1f} {cpu / floor_cpu:>6.2f}")
        imports = subprocess.run([py, "-X", "importtime", str(ROOT / "Tools" / "varaverk_tools" / "ai_index.py"), "-q"],
                                 env=env, cwd=repo, capture_output=True, text=True).stderr
        rows = []
        for line in imports.splitlines():
            parts = line.split("|")
            if not line.startswith("import time:") or len(parts) != 3:
                continue
            name = parts[2]
            if name.strip() and not name[1:].startswith(" ") and parts[1].strip().isdigit():
                rows.append((int(parts[1]), name.strip()))  # top-level imports only
        print("largest imports on the no-op path (cumulative µs, top-level):")
        for cum, name in sorted(rows)[-8:][::-1]:
            print(f"  {cum:>7}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
