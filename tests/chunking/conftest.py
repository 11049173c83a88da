"""Fixtures for the chunking tests: token counters and the fixture corpora."""

from __future__ import annotations

import pytest

from tests.chunking.support import decode, harborlab_kind
from tests.support.repos import git, shared_corpus


@pytest.fixture(scope="session")
def real_count_tokens():
    """The offline embedder's WordPiece counter when ``varaverk.embedding`` is importable."""
    try:
        from varaverk.config import Settings
        from varaverk.embedding import make_embedder
    except ImportError:  # the embedding module is another area's; fall back to characters
        return len
    return make_embedder(Settings()).count_tokens


@pytest.fixture(scope="session")
def harborlab_docs(harborlab_pristine) -> list[tuple[str, str, str]]:
    """(path, kind, text) for every tracked harborlab file that has a documentation kind."""
    tracked = git(harborlab_pristine, "ls-files", "-z").split("\0")
    out = []
    for path in sorted(p for p in tracked if p):
        kind = harborlab_kind(path)
        if kind:
            out.append((path, kind, decode((harborlab_pristine / path).read_bytes())))
    return out


@pytest.fixture(scope="session")
def frigate_docs() -> list[tuple[str, str, str]]:
    """(path, kind, text) for every Markdown file of the Frigate docs fixture (read in place);
    skips without the shared folder (a third-party corpus we do not ship)."""
    root = shared_corpus("fixtures/frigate-docs")
    return [(str(p.relative_to(root)), "doc", decode(p.read_bytes()))
            for p in sorted(root.rglob("*.md"))]
