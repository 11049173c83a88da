"""Benchmark: a whole ``ai-query --search`` process against the embedder floor (run on demand).

The floor is what any one-shot search must do at least: start Python, load the offline
embedder (onnxruntime session and tokenizer), embed the question, read the index's vectors
(one ``.npy`` file exported from the index beforehand) and score them with one matrix product.
The project's figure adds the settings, the command line, opening the index and the search
pipeline (lexical scores, fusion, ranking) and printing the chunks. Target: <= 1.1x the floor.
Both run interleaved, so load changes hit both alike; CPU time (process and children) is the
steadier figure on a shared machine. Also lists the modules the search imported that the
floor did not, largest first (``-X importtime``).

    python -m tests.benchmarks.bench_query_startup [--runs 15] [--data-dir DIR] [--compare TREE]

``--compare TREE`` also times the search of another checkout of the project (``git archive main
| tar -x -C TREE``), run from TREE with ``PYTHONPATH=TREE/AI:TREE/Tools``, interleaved with the
others: a before/after under one load.

``--data-dir`` keeps (or reuses) the harborlab repository and its index built with the offline
embedder, which takes a minute or two on a loaded machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.benchmarks import compare_env, load_average, timed_runs
from tests.support.environ import environ_without_ai
from tests.support.repos import make_harborlab

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "how long does the mover wait before it escalates to SIGTERM"

FLOOR = """
import sys
import numpy as np
import onnxruntime
from tokenizers import Tokenizer
model, tokenizer_file, vectors, question = sys.argv[1:5]
tok = Tokenizer.from_file(tokenizer_file)
options = onnxruntime.SessionOptions()
options.log_severity_level = 3
session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
ids = np.array([tok.encode(question).ids], dtype=np.int64)
feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
if "token_type_ids" in {i.name for i in session.get_inputs()}:
    feeds["token_type_ids"] = np.zeros_like(ids)
(hidden,) = session.run(["last_hidden_state"], feeds)
q = hidden[0].mean(axis=0)
q /= np.linalg.norm(q)
scores = np.load(vectors) @ q.astype(np.float32)
print(np.argsort(-scores)[:5])
"""


def _search(tree: Path) -> list[str]:
    """The ``ai-query --search`` command of the checkout ``tree``."""
    return [sys.executable, str(tree / "Tools" / "varaverk_tools" / "ai_query.py"), "--search",
            QUESTION]


def _build(data: Path, repo: Path, env: dict) -> None:
    """The harborlab index in ``data``, built with the offline embedder unless present."""
    if not (data / "indexes").is_dir():
        subprocess.run([sys.executable, str(ROOT / "Tools" / "varaverk_tools" / "ai_index.py"),
                        "-q"], env=env, cwd=repo, check=True)


def _export_vectors(env: dict, repo: Path, out: Path) -> int:
    """Write the index's vector matrix to ``out`` (``.npy``); returns its row count."""
    code = ("import sys, numpy as np\nfrom varaverk.config import load_settings\n"
            "from varaverk.index.store.index import Index\n"
            "with Index.open(load_settings().index_path, readonly=True) as idx:\n"
            "    m = idx.vector_table().matrix\n"
            "np.save(sys.argv[1], m)\nprint(len(m))")
    out_text = subprocess.run([sys.executable, "-c", code, str(out)], env=env, cwd=repo,
                              check=True, capture_output=True, text=True).stdout
    return int(out_text.strip())


def _extra_imports(env: dict, repo: Path, model: str, tokenizer: str, vectors: Path
                   ) -> list[tuple[int, str]]:
    """``[(cumulative µs, module)]`` of top-level imports of the search the floor lacks."""
    def imports(cmd: list[str]) -> dict[str, int]:
        err = subprocess.run([sys.executable, "-X", "importtime", *cmd], env=env, cwd=repo,
                             capture_output=True, text=True).stderr
        found = {}
        for line in err.splitlines():
            parts = line.split("|")
            if line.startswith("import time:") and len(parts) == 3 and parts[1].strip().isdigit():
                found[parts[2].strip()] = (int(parts[1]), len(parts[2]) - len(parts[2].lstrip()))
        return found
    floor = imports(["-c", FLOOR, model, tokenizer, str(vectors), QUESTION])
    ours = imports([str(ROOT / "Tools" / "varaverk_tools" / "ai_query.py"), "--search",
                    QUESTION])
    base = min(depth for _, depth in ours.values())
    return sorted(((cum, name) for name, (cum, depth) in ours.items()
                   if name not in floor and depth == base), reverse=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--compare", type=Path, metavar="TREE",
                        help="also time the search of this other checkout, interleaved")
    parser.add_argument("--data-dir", type=Path,
                        help="keep the repository and its index here (reused if built)")
    args = parser.parse_args()
    from varaverk.embedding import local_model_files

    model, tokenizer = (str(p) for p in local_model_files())
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        work = (args.data_dir or tmp).resolve()
        data, repo = work / "data", work / "harborlab"
        if not repo.is_dir():
            make_harborlab(repo)
        env = environ_without_ai()
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # measured as deployed, with .pyc files
        env.update(AI_ENABLED="true", AI_REPO_ROOT=str(repo), AI_DATA_DIR=str(data),
                   AI_LOG_DIR=str(tmp / "log"), AI_EMBED_BACKEND="local")
        _build(data, repo, env)
        vectors = tmp / "vectors.npy"
        rows = _export_vectors(env, repo, vectors)
        cmds = {
            "floor (load embedder, embed, score matrix)":
                ([sys.executable, "-c", FLOOR, model, tokenizer, str(vectors), QUESTION], env),
            "ai-query --search (whole process)": (_search(ROOT), env),
        }
        if args.compare is not None:
            tree = args.compare.resolve()
            cmds[f"ai-query --search of {tree}"] = (_search(tree), compare_env(env, tree))
        for cmd, cmd_env in cmds.values():  # warm the page cache and .pyc files
            timed_runs(cmd, cmd_env, repo, 2)
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in cmds}
        for _ in range(args.runs):
            for name, (cmd, cmd_env) in cmds.items():
                samples[name] += timed_runs(cmd, cmd_env, repo, 1)
        first = samples[next(iter(cmds))]
        floor_wall = statistics.median(w for w, _ in first)
        floor_cpu = statistics.median(c for _, c in first)
        print(f"harborlab, {rows} vectors, offline embedder; {args.runs} interleaved runs; "
              f"load {load_average()} on {os.cpu_count()} CPUs")
        print(f"{'command':<44} {'wall ms':>8} {'ratio':>6} {'cpu ms':>7} {'ratio':>6}")
        for name, runs in samples.items():
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            print(f"{name[-44:]:<44} {wall * 1000:>8.1f} {wall / floor_wall:>6.2f} "
                  f"{cpu * 1000:>7.1f} {cpu / floor_cpu:>6.2f}")
        print("largest imports of the search that the floor does not make (cumulative µs):")
        for cum, name in _extra_imports(env, repo, model, tokenizer, vectors)[:10]:
            print(f"  {cum:>8}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
