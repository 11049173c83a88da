"""The index's progress file: written while a real refresh embeds, gone when it ends however it
ends, and read as "no run" when its process is gone or silent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.index.conftest import make_settings
from varaverk.index.progress_file import STALE_SECONDS, progress_path, read_progress
from varaverk.index.refresh import refresh


def test_a_refresh_reports_its_embedding_progress_then_removes_the_file(harborlab, tmp_path,
                                                                        model_server):
    settings = make_settings(harborlab, tmp_path, model_server)
    seen: list[dict | None] = []
    report = refresh(settings, progress=lambda done, total: seen.append(
        read_progress(settings.index_path)))
    assert report.chunks_embedded > 100
    running = [s for s in seen if s is not None]
    assert len(running) == len(seen), "the file was missing while the run went on"
    assert {s["phase"] for s in running} <= {"reading", "embedding"}
    embedding = [s for s in running if s["phase"] == "embedding"]
    assert embedding, running[:3]
    assert [s["done"] for s in embedding] == sorted(s["done"] for s in embedding)
    # Batch by batch: the total is the chunks queued so far, growing to the run's count.
    totals = [s["total"] for s in embedding]
    assert totals == sorted(totals) and totals[-1] == report.chunks_embedded
    assert all(0 < s["done"] <= s["total"] for s in embedding)
    assert not progress_path(settings.index_path).exists()
    assert read_progress(settings.index_path) is None


def test_the_progress_file_costs_a_refresh_no_fsync(harborlab, tmp_path, model_server,
                                                    monkeypatch):
    """The progress file is rewritten several times a run; syncing it to disk each time cost
    an incremental refresh of a few files more wall time than its own work (a power cut leaves
    at worst a file naming a dead run, which reads as none). The index itself is synced."""
    settings = make_settings(harborlab, tmp_path, model_server)
    synced: list[str] = []
    real_fsync = os.fsync

    def spy(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    assert refresh(settings, progress=False).chunks_embedded > 100
    assert not [p for p in synced if ".progress.json" in p], synced


def test_a_failed_refresh_leaves_no_progress_file(harborlab, tmp_path, model_server):
    settings = make_settings(harborlab, tmp_path, model_server)

    def stop(done, total):
        assert progress_path(settings.index_path).exists()
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        refresh(settings, progress=stop)
    assert not progress_path(settings.index_path).exists()


def _write(path, **body):
    now = time.time()
    path.write_text(json.dumps({"pid": os.getpid(), "phase": "embedding", "done": 1,
                                "total": 2, "started": now, "updated": now, **body}))


def test_a_file_left_by_a_dead_or_silent_run_reads_as_no_run(tmp_path):
    index = tmp_path / "index.sqlite"
    path = progress_path(index)
    _write(path)
    assert read_progress(index)["done"] == 1
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    _write(path, pid=int(gone))
    assert read_progress(index) is None
    _write(path, updated=time.time() - STALE_SECONDS - 5)
    assert read_progress(index) is None
    path.write_text("{not json")
    assert read_progress(index) is None
    path.write_text('["a list"]')
    assert read_progress(index) is None
