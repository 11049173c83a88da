"""Dogfooding: ai-index's own header answers "what stops two index runs overlapping"."""

from __future__ import annotations

import shutil

from tests.index.conftest import MAIN, make_settings
from tests.support.repos import harborlab_files, make_repo
from varaverk.index.refresh import refresh
from varaverk.retrieval.search import Retriever

DISTRACTORS = ("Backup/rsync_mirror.sh", "Tools/docs_indexer.py", "Tools/mover_stop.sh",
               "Maintenance/daily_dispatch.sh")


def test_index_lock_paragraph_is_found_in_our_own_header(tmp_path):
    files = {"Tools/varaverk_tools/ai_index.py": (MAIN / "Tools" / "varaverk_tools" / "ai_index.py").read_bytes()}
    for rel in DISTRACTORS:  # other scripts with locks of their own
        files[rel] = harborlab_files()[rel]
    repo = make_repo(tmp_path / "repo", files)
    settings = make_settings(repo, tmp_path, None, ai_embed_backend="local")
    report = refresh(settings, progress=False)
    assert report.indexed == len(files) and report.failures == []
    retriever = Retriever(settings)
    hits = retriever.search("what stops two index runs overlapping", k=3)
    top = hits[0].chunk
    assert (top.path, top.section, top.title) == \
        ("Tools/varaverk_tools/ai_index.py", "OPERATIONAL SAFEGUARDS", "Index Lock Against Overlapping Runs")
    assert "AI_INDEX_LOCK_TIMEOUT" in top.text and "75" in top.text
    shutil.rmtree(settings.ai_data_dir)
