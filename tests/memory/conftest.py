"""Memory fixtures: settings whose data folder is the test's own, with the deterministic
model server as the embedder (``ollama``) and, unless a test says otherwise, the extractive
digest."""

from __future__ import annotations

import pytest

from varaverk.config import Settings


def turn(role: str, text: str, at: str, ref: str | None = None) -> dict:
    """A turn dict as ``HostMemory.remember`` takes it (speaker = role)."""
    out = {"speaker": role, "role": role, "said_at": at, "text": text}
    if ref:
        out["turn_ref"] = ref
    return out


@pytest.fixture
def memory_settings(tmp_path, model_server) -> Settings:
    # 1024 buckets: few hash collisions between the words of unrelated sentences.
    model_server.dims["bow"] = 1024
    return Settings(ai_data_dir=tmp_path / "data", ai_repo_root=tmp_path,
                    ai_config=tmp_path / "none.conf", ai_embed_backend="ollama",
                    ai_embed_model="bow", ai_ollama_hosts=(model_server.base_url,),
                    ai_gen_backend="ollama", ai_gen_model="chat", ai_memory_enabled=True,
                    ai_memory_digest="extractive", ai_http_timeout=10.0)


@pytest.fixture
def memory(memory_settings):
    from varaverk.memory.host_memory import HostMemory

    with HostMemory(memory_settings) as mem:
        yield mem


NAS_TALK = [
    turn("user", "The NAS is the Synology at 192.168.1.20.", "2026-03-02T10:00:00"),
    turn("assistant", "Noted: the NAS is the Synology at .20.", "2026-03-02T10:00:05"),
    turn("user", "I moved restic backups to the NAS because the cloud bill doubled.",
         "2026-03-02T10:01:00"),
    turn("assistant", "Restic now writes its backups to the NAS.", "2026-03-02T10:01:05"),
]
MOVER_TALK = [
    turn("user", "Never restart the mover during a parity check.", "2026-03-05T09:00:00"),
    turn("assistant", "Understood: the mover waits until parity finishes.",
         "2026-03-05T09:00:04"),
]
