"""Fixtures for the query tests: harborlab indexed once per session with the real offline
embedder, settings pointing at it, and settings for a model server on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import pytest

from varaverk.config import Settings


def query_settings(repo: Path, data: Path, server=None, **changes) -> Settings:
    """Settings reading the index in ``data``; generation on ``server`` (Ollama) when given,
    else on a closed port (nothing reachable)."""
    base = dict(ai_enabled=True, ai_repo_root=repo, ai_data_dir=data,
                ai_log_dir=data.parent / "log", ai_gen_backend="ollama", ai_gen_model="m",
                ai_ollama_hosts=(server.base_url if server else "http://127.0.0.1:9",),
                ai_http_timeout=10.0, ai_host_name="hostA")
    base.update(changes)
    return Settings(**base)


@pytest.fixture(scope="session")
def harborlab_index(harborlab_pristine, tmp_path_factory) -> Path:
    """The data folder of a harborlab index built with the offline embedder (built once)."""
    from varaverk.index.refresh import refresh
    data = tmp_path_factory.mktemp("query-index") / "data"
    refresh(query_settings(harborlab_pristine, data), progress=False)
    return data


@pytest.fixture(scope="session")
def retriever(harborlab_pristine, harborlab_index):
    """One Retriever over the session's harborlab index (as the dock holds one per process)."""
    from varaverk.retrieval.search import Retriever
    return Retriever(query_settings(harborlab_pristine, harborlab_index))


@pytest.fixture
def hl_settings(harborlab_pristine, harborlab_index):
    """Settings over the harborlab index with nothing reachable for generation."""
    return query_settings(harborlab_pristine, harborlab_index)
