"""A hostile /v1/rerank server costs the reranking and nothing else (issue 21): 100k nested
brackets, a trickle, an endless body, a gzip bomb and malformed answers each keep the fused
order, within about one AI_HTTP_TIMEOUT and without holding the body in memory, both in the
Retriever and in ``ai-query --search`` run as users run it."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.query.conftest import query_settings
from tests.support import hostile_server as hs
from tests.support.environ import environ_without_ai
from tests.support.measured import PEAK_MIB
from tests.support.repos import make_repo

DEADLINE = 2.0
QUERY = "restore snapshot restic newest file"
DOCS = {  # one file each: neighbouring sections of one file would be merged into one result
    "docs/schedule.md": "# Schedule\n\nThe nightly backup job starts at 02:00 with restic.\n",
    "docs/retention.md": "# Retention\n\nSnapshots are kept for fourteen days, then pruned.\n",
    "docs/restore.md": "# Restore\n\nRestore a file from the newest snapshot with restic.\n",
}


def _last_first(request: bytes) -> bytes:
    """A valid rerank answer that puts the last document sent first."""
    n = len(json.loads(request.partition(b"\r\n\r\n")[2])["documents"])
    return json.dumps({"results": [{"index": n - 1, "relevance_score": 1.0}]}).encode()


def last_first(conn, request) -> None:
    hs.answer(_last_first(request))(conn, request)


def trickled_last_first(conn, request) -> None:
    hs.trickle(_last_first(request), every=0.2)(conn, request)


SHAPES = {
    "100k nested brackets": lambda: hs.deep_json(100_000),
    "trickle": lambda: trickled_last_first,
    "trickled headers": lambda: hs.trickle(b'{"results": []}', every=0.2, headers_too=True),
    "300 MB body": lambda: hs.padded(300 << 20),
    "gzip bomb": lambda: hs.gzip_bomb(256 << 20),
    "truncated JSON": lambda: hs.answer(b'{"results": [{"index": 0, "relevance_score": 1.0'),
    "index 1e999": lambda: hs.answer(b'{"results": [{"index": 1e999, "relevance_score": 1}]}'),
    "index true": lambda: hs.answer(b'{"results": [{"index": true, "relevance_score": 1}]}'),
    "score as text": lambda: hs.answer(b'{"results": [{"index": 1, "relevance_score": "9"}]}'),
    "html page": lambda: hs.answer(b"<html>502 Bad Gateway</html>", content_type="text/html"),
    "not UTF-8": lambda: hs.answer(b'{"results": "\xff\xfe"}'),
    "brotli": lambda: hs.answer(b"\x0b\x02\x80{}\x03", Content_Encoding="br"),
}


@pytest.fixture
def indexed(tmp_path, model_server):
    from varaverk.index.refresh import refresh
    repo = make_repo(tmp_path / "repo", DOCS)
    settings = query_settings(repo, tmp_path / "data", model_server, ai_embed_backend="ollama",
                              ai_embed_model="m", ai_http_timeout=DEADLINE)
    refresh(settings, progress=False)
    return settings


def _ids(settings, **changes):
    from varaverk.retrieval.search import Retriever
    retriever = Retriever(settings.replace(**changes), reranker=None if changes else False)
    return [h.chunk.id for h in retriever.search(QUERY, 3)]


def test_a_well_behaved_reranker_does_change_the_order(indexed):
    """The control: an answer the hostile shapes imitate would reorder the results."""
    fused = _ids(indexed)
    with hs.HostileServer({"/v1/rerank": last_first}) as server:
        reranked = _ids(indexed, ai_rerank_url=server.openai_base_url)
    assert len(fused) == 3 and reranked[0] == fused[-1]


@pytest.mark.parametrize("shape", list(SHAPES))
def test_retriever_keeps_the_fused_order(indexed, shape, caplog):
    fused = _ids(indexed)
    with hs.HostileServer({"/v1/rerank": SHAPES[shape]()}) as server:
        started = time.monotonic()
        kept = _ids(indexed, ai_rerank_url=server.openai_base_url)
        elapsed = time.monotonic() - started
        assert server.paths == ["/v1/rerank"]
    print(f"{shape}: fused order kept after {elapsed:.2f} s (deadline {DEADLINE:g} s)")
    assert kept == fused
    assert "keeping the fused order" in caplog.text
    assert elapsed < DEADLINE + 8  # generous: the point is one deadline, not minutes


PEAK = (PEAK_MIB +
        "import sys\n"
        "from varaverk_tools.ai_query import main\n"
        "code = main(sys.argv[1:])\n"
        "print('peak-mib', peak_mib(), file=sys.stderr)\n"
        "sys.exit(code)\n")


def _search(settings, rerank_url: str) -> tuple[subprocess.CompletedProcess, float, int]:
    """``ai-query --search --json`` in a subprocess: (result, seconds, peak RSS in MiB)."""
    env = environ_without_ai(
        AI_ENABLED="true", AI_REPO_ROOT=str(settings.ai_repo_root),
        AI_DATA_DIR=str(settings.ai_data_dir), AI_LOG_DIR=str(settings.ai_log_dir),
        AI_EMBED_BACKEND="ollama", AI_EMBED_MODEL="m",
        AI_OLLAMA_HOSTS=" ".join(settings.ai_ollama_hosts), AI_HTTP_TIMEOUT=str(DEADLINE),
        AI_RERANK_URL=rerank_url)
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", PEAK, "--search", "--json", "-k", "3", QUERY],
                         capture_output=True, text=True, env=env, timeout=120)
    elapsed = time.monotonic() - started
    peak = [float(line.split()[1]) for line in out.stderr.splitlines()
            if line.startswith("peak-mib")]
    return out, elapsed, (round(peak[0]) if peak else -1)


def _paths(out: subprocess.CompletedProcess) -> list[tuple[str, str]]:
    assert out.returncode == 0, out.stderr
    return [(r["path"], r["title"]) for r in json.loads(out.stdout)["results"]]


@pytest.mark.parametrize("shape", ["100k nested brackets", "trickle", "300 MB body",
                                   "gzip bomb", "index 1e999"])
def test_ai_query_search_keeps_the_fused_order_in_bounded_time_and_memory(indexed, shape):
    plain, _, base_peak = _search(indexed, "")
    with hs.HostileServer({"/v1/rerank": SHAPES[shape]()}) as server:
        out, elapsed, peak = _search(indexed, server.openai_base_url)
    print(f"ai-query --search, {shape}: exit {out.returncode} in {elapsed:.1f} s, peak RSS "
          f"{peak} MiB (without a reranker {base_peak} MiB)")
    assert _paths(out) == _paths(plain)
    assert "keeping the fused order" in out.stderr
    assert elapsed < DEADLINE + 15  # start-up included; the unbounded reads took minutes
    assert 0 < peak < base_peak + 64, f"peak RSS {peak} MiB, {base_peak} MiB without reranker"
