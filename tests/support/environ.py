"""What an entry point run by a test reads: its master.conf and its environment."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path


def write_master_conf(path: Path, values: Mapping[str, object]) -> Path:
    """Write ``values`` as ``KEY="value"`` lines (double-quoted, escaped) to ``path``; returns it."""
    path.write_text("".join(f"{key}={json.dumps(str(value))}\n" for key, value in values.items()),
                    encoding="utf-8")
    return path


def environ_without_ai(**extra: str) -> dict[str, str]:
    """This process's environment without its ``AI_*`` keys, plus ``extra``: a subprocess then
    reads only the keys a test gives it (the developer's own settings never leak in)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AI_")}
    env.update(extra)
    return env
