"""Benchmarks, run on demand (never in the unit suite); each module's docstring says how."""

from __future__ import annotations

import os
import resource
import subprocess
import threading
import time
from pathlib import Path


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages as ``"0.12 0.34 0.56"``: printed beside the
    figures, since the host may be shared and load moves them."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def timed_runs(cmd: list[str], env: dict, cwd: Path, runs: int) -> list[tuple[float, float]]:
    """``[(wall seconds, CPU seconds of the process and its children)]``; CPU time is the
    steadier figure on a shared, loaded machine."""
    out = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        out.append((wall, cpu))
    return out


def compare_env(env: dict, tree: Path) -> dict:
    """``env`` running the checkout ``tree`` instead of the installed project: its folders go
    first on ``PYTHONPATH``, ahead of the editable install's finder."""
    return dict(env, PYTHONPATH=os.pathsep.join([str(tree / "AI"), str(tree / "Tools")]))


def others_running() -> bool:
    """Whether a thread of this process other than the caller is running (Linux ``/proc``;
    elsewhere False)."""
    me = str(threading.get_native_id())
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return False
    for tid in tids:
        if tid == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat") as fh:
                state = fh.read().rpartition(")")[2].split(None, 1)[0]
        except (OSError, IndexError):
            continue  # the thread ended
        if state == "R":
            return True
    return False


def settle(limit: float = 2.0) -> None:
    """Wait (up to ``limit`` seconds) until no other thread of this process has run for two
    looks 2 ms apart: onnxruntime's idle workers spin before they block, and so does
    OpenBLAS's pool after numpy's import and after each product it shares."""
    calm, deadline = 0, time.monotonic() + limit
    while calm < 2 and time.monotonic() < deadline:
        time.sleep(0.002)
        calm = 0 if others_running() else calm + 1
