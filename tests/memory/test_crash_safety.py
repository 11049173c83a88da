"""kill -9 during a digest loses no raw turn and leaves no half-written triplet (a real
subprocess, killed with SIGKILL while it digests)."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time

from varaverk.memory.host_memory import HostMemory

DIGESTER = """
import json, sys
from pathlib import Path
from varaverk.config import Settings
from varaverk.memory.host_memory import HostMemory
args = json.loads(sys.argv[1])
settings = Settings(ai_data_dir=Path(args["data"]), ai_repo_root=Path(args["data"]),
                    ai_config=Path(args["data"]) / "none.conf", ai_embed_backend="ollama",
                    ai_embed_model="bow", ai_ollama_hosts=(args["host"],),
                    ai_memory_digest="extractive")
with HostMemory(settings) as mem:
    turns = [{"speaker": r, "role": r, "said_at": "2026-03-02T10:00:00",
              "text": f"Turn {i} says the backup number {i} ran on disk {i % 7}. It was fine."}
             for i, r in zip(range(args["turns"]), ["user", "assistant"] * args["turns"])]
    mem.remember("long", turns)
    print("remembered", flush=True)
    mem.digest_pending(lambda done, total: print("digested", done, total, flush=True))
"""


def test_kill_9_during_a_digest_keeps_every_turn_and_whole_triplets(tmp_path, model_server):
    data = tmp_path / "data"
    count = 301  # 150 triplets
    proc = subprocess.Popen([sys.executable, "-c", DIGESTER, json.dumps(
        {"data": str(data), "host": model_server.base_url, "turns": count})],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    digested = 0
    for line in proc.stdout:
        if line.startswith("digested"):
            digested = int(line.split()[1])
            if digested >= 20:
                break
        assert time.monotonic() < deadline
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    assert digested >= 20

    conn = sqlite3.connect(data / "memory.db")
    assert conn.execute("SELECT count(*) FROM turns").fetchone()[0] == count
    triplets = conn.execute("SELECT count(*) FROM triplets").fetchone()[0]
    assert 20 <= triplets < 150, "killed mid-run: some triplets written, not all"
    lonely = conn.execute("SELECT count(*) FROM triplets t WHERE NOT EXISTS (SELECT 1 FROM facts "
                          "f WHERE f.triplet = t.id) OR NOT EXISTS (SELECT 1 FROM recollections "
                          "r WHERE r.triplet = t.id)").fetchone()[0]
    orphans = conn.execute("SELECT count(*) FROM facts WHERE triplet NOT IN "
                           "(SELECT id FROM triplets)").fetchone()[0]
    assert (lonely, orphans) == (0, 0)
    conn.close()

    from varaverk.config import Settings
    settings = Settings(ai_data_dir=data, ai_repo_root=tmp_path, ai_config=tmp_path / "x.conf",
                        ai_embed_backend="ollama", ai_embed_model="bow",
                        ai_ollama_hosts=(model_server.base_url,), ai_memory_digest="extractive")
    with HostMemory(settings) as mem:  # the next run finishes the job
        assert mem.digest_pending() == 150 - triplets
        assert len(mem.store.triplets()) == 150
