"""Fixtures for the index tests: settings pointing at a temporary data folder, and a runner for
the ``ai-index`` entry point as a real subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.environ import environ_without_ai
from varaverk.config import Settings

MAIN = Path(__file__).resolve().parents[2]
ENTRY = MAIN / "Tools" / "varaverk_tools" / "ai_index.py"


def make_settings(repo: Path, tmp_path: Path, server=None, **changes) -> Settings:
    """Settings for indexing ``repo`` into ``tmp_path/data``; Ollama on ``server`` if given."""
    base = dict(ai_enabled=True, ai_repo_root=repo, ai_data_dir=tmp_path / "data",
                ai_log_dir=tmp_path / "log", ai_index_lock_timeout=5.0)
    if server is not None:
        base.update(ai_embed_backend="ollama", ai_embed_model="all-minilm",
                    ai_ollama_hosts=(server.base_url,), ai_embed_batch=8)
    base.update(changes)
    return Settings(**base)


def cli_env(settings: Settings, **extra: str) -> dict[str, str]:
    """The environment that makes a subprocess load exactly ``settings``' index-related keys."""
    env = environ_without_ai()
    env.update({
        "AI_ENABLED": "true" if settings.ai_enabled else "false",
        "AI_REPO_ROOT": str(settings.ai_repo_root),
        "AI_DATA_DIR": str(settings.ai_data_dir),
        "AI_LOG_DIR": str(settings.ai_log_dir),
        "AI_EMBED_BACKEND": settings.ai_embed_backend,
        "AI_EMBED_MODEL": settings.ai_embed_model,
        "AI_EMBED_BATCH": str(settings.ai_embed_batch),
        "AI_OLLAMA_HOSTS": " ".join(settings.ai_ollama_hosts),
        "AI_INDEX_LOCK_TIMEOUT": str(settings.ai_index_lock_timeout),
    })
    env.update(extra)
    return env


def run_index(settings: Settings, *args: str, console_script: bool = False,
              env_extra: dict[str, str] | None = None, timeout: float = 600
              ) -> subprocess.CompletedProcess:
    """Run ``python Tools/varaverk_tools/ai_index.py ARGS`` (or the ``ai-index`` console script) for ``settings``."""
    if console_script:
        cmd = [str(Path(sys.executable).parent / "ai-index"), *args]
    else:
        cmd = [sys.executable, str(ENTRY), *args]
    return subprocess.run(cmd, env=cli_env(settings, **(env_extra or {})), capture_output=True,
                          text=True, timeout=timeout, cwd=str(settings.ai_repo_root))


def embed_inputs(server) -> list[str]:
    """Every text the fake server was asked to embed (/api/embed and /api/embeddings)."""
    texts: list[str] = []
    for rec in server.requests:
        if rec.path == "/api/embed":
            inputs = rec.json.get("input")
            texts.extend([inputs] if isinstance(inputs, str) else inputs)
        elif rec.path == "/api/embeddings":
            texts.append(rec.json.get("prompt"))
    return texts
