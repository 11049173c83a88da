"""What one dock process holds, and how a view reaches it.

Views and blueprints read the process's state with ``dock_state()``, never by importing the
factory module (``varaverk_dock.app``), so the factory may import every blueprint.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from flask import current_app

from varaverk.config import Settings
from varaverk.retrieval.options import RetrieverOptions
from varaverk.retrieval.search import Retriever
from varaverk_dock.conversations import ChatStore

log = logging.getLogger("varaverk.dock")

# The key of the dock's state in ``app.extensions``.
EXTENSION = "varaverk_dock"


@dataclass
class DockState:
    """What one dock process holds: settings, the chat store and, made once, the retriever
    and chat client the worker uses (one per process, created lazily after gunicorn forks)."""

    settings: Settings
    store: ChatStore
    loopback: bool
    retriever: Any = None
    chat_client: Any = None
    turn_log: Any = None      # varaverk.answering.turn_log.TurnLog, made by the factory
    turn_runner: Any = None   # varaverk.answering.turn_runner.TurnRunner: this process's turns
    streams: Any = None       # threading.BoundedSemaphore: attached event streams (cap)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def get_chat_client(self):
        """The process's chat client, made once
        (``varaverk.answering.generation.chat_client.make_chat_client``)."""
        if self.chat_client is None:
            with self._lock:
                if self.chat_client is None:
                    # httpx: a worker that never generates never loads it
                    from varaverk.answering.generation.chat_client import make_chat_client
                    self.chat_client = make_chat_client(self.settings)
        return self.chat_client

    def get_retriever(self):
        """The process's retriever, made once; None while no usable index exists (the worker
        then reports that itself, and the next ask tries again)."""
        if self.retriever is None:
            with self._lock:
                if self.retriever is None:
                    try:
                        options = RetrieverOptions.from_settings(self.settings, preload=True)
                        self.retriever = Retriever(self.settings, options=options)
                    except Exception as exc:  # IndexMissing, IndexMismatch, embedder errors
                        log.warning("retriever unavailable: %s", exc)
                        return None
        return self.retriever



def dock_state() -> DockState:
    """The current application's DockState (inside a request or app context)."""
    return current_app.extensions[EXTENSION]
