"""Fixtures for the summary tests: a small documentation repository indexed through the test
model server (its embeddings), with one file long enough for several refine parts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.index.conftest import make_settings
from tests.support.repos import make_repo


def long_manual() -> str:
    """A Markdown manual of about 20,000 characters in 20 sections (several refine parts)."""
    sections = [f"## Step {i}\n\nStep {i} sets MOVER_OPTION_{i} before the mirror runs. " * 1
                + ("The mover waits for the parity check and logs every skipped share. " * 14)
                for i in range(20)]
    return "# Mover manual\n\nThe mover moves cached files to the array every night.\n\n" + \
        "\n\n".join(sections) + "\n"


# A long section: results from several such documents do not all fit a small context.
DETAILS = "\n\n## Details\n\n" + "The {0} job logs each run and keeps {0} state on the pool. " * 30

DOCS = {
    "Docs/README-Backup.md": "# Backup\n\nThe backup job copies the pool to the offsite disk "
                             "every Sunday. It never deletes.\n\n## Restore\n\nRun restore.sh "
                             "with the snapshot name." + DETAILS.format("backup") + "\n",
    "Docs/README-Media.md": "# Media\n\nThe media jobs keep the library index current and clean "
                            "up after downloads.\n\n## Scan\n\nlibrary_scan.py walks the shares."
                            "\n\n## Orphans\n\nAn orphan is a download nobody seeds."
                            + DETAILS.format("media") + "\n",
    "Docs/Manual-Mover.md": long_manual(),
    "Docs/notes.md": "# Notes\n\nLoose notes about the fans and the disks spinning down.\n",
}


def summary_settings(repo: Path, tmp_path: Path, server, **changes):
    """Index settings on the model server, summaries on (extractive unless changed)."""
    base = dict(ai_summaries="extractive", ai_gen_backend="ollama", ai_gen_model="m",
                ai_http_timeout=10.0)
    base.update(changes)
    return make_settings(repo, tmp_path, server, **base)


@pytest.fixture
def docs_repo(tmp_path) -> Path:
    return make_repo(tmp_path / "docs", DOCS)


@pytest.fixture
def indexed(docs_repo, tmp_path, model_server):
    """``settings`` of ``docs_repo`` indexed (no summaries yet)."""
    from varaverk.index.refresh import refresh
    settings = summary_settings(docs_repo, tmp_path, model_server)
    refresh(settings, progress=False)
    return settings
