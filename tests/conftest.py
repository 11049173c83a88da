"""Shared fixtures. Area-specific fixtures live in each area's own conftest.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.repos import make_harborlab


@pytest.fixture(autouse=True)
def _restore_logging():
    """Entry points configure the ``varaverk`` logger (handlers, no propagation) and
    setup_logging remembers the log folder; undo both after every test, so that tests that
    capture logs do not depend on the order tests run in."""
    import logging

    from varaverk import logs
    logger = logging.getLogger("varaverk")
    saved = (list(logger.handlers), logger.propagate, logger.level, dict(logs._last))
    yield
    for handler in list(logger.handlers):
        if handler not in saved[0]:
            logger.removeHandler(handler)
            handler.close()
    logger.propagate, logger.level = saved[1], saved[2]
    logs._last.clear()
    logs._last.update(saved[3])


@pytest.fixture(autouse=True)
def _forget_hosts():
    """Every test chooses its Ollama host afresh: the choice is remembered per process, and
    each test's model server listens on a port of its own."""
    from varaverk import modelservers
    modelservers.forget()
    yield
    modelservers.forget()


@pytest.fixture(scope="session")
def harborlab_pristine(tmp_path_factory) -> Path:
    """One harborlab repository per session; copy it (``harborlab``) before changing it."""
    return make_harborlab(tmp_path_factory.mktemp("pristine") / "harborlab")


@pytest.fixture
def harborlab(harborlab_pristine, tmp_path) -> Path:
    """A private copy of the harborlab repository that a test may change."""
    dest = tmp_path / "harborlab"
    shutil.copytree(harborlab_pristine, dest, symlinks=True)
    return dest


@pytest.fixture
def model_server():
    """A started ``tests.support.model_server.ModelServer`` on 127.0.0.1 (stopped afterwards).

    Knobs (dimensions, scripted replies, failure injection...) are documented in that module.
    """
    from tests.support.model_server import ModelServer

    with ModelServer() as server:
        yield server
