"""Fixtures for the model-boundary tests (embedding, generation, host choice)."""

from __future__ import annotations

import socket

import pytest


@pytest.fixture
def dead_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
