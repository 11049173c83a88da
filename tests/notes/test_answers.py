"""Answers from notes: the notes profile's scope, chat's escalation to it, the dock's status
and similar routes, and an index of the first schema migrated with its chunks intact."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from tests.index.conftest import make_settings
from tests.notes.corpus import REPO_README, make_notes_sources, sources_value
from tests.support.repos import make_repo
from varaverk.index.refresh import refresh
from varaverk.answering.answer import TurnRequest, run_turn
from varaverk.documents.chunks import Chunk
from varaverk.index.store.index import Index
from varaverk.index.store.records import IndexChanges
from varaverk.index.store.schema import MIGRATIONS, SCHEMA_VERSION, split_sql

RESTIC = "how many daily weekly and monthly restic snapshots are kept retention"


@pytest.fixture
def indexed(tmp_path, model_server):
    repo = make_repo(tmp_path / "repo", {"README.md": REPO_README})
    paths = make_notes_sources(tmp_path / "notes")
    settings = make_settings(repo, tmp_path, model_server, ai_sources=sources_value(paths),
                             ai_gen_backend="ollama", ai_gen_model="fake-chat",
                             ai_min_score=0.01)
    refresh(settings, progress=False)
    return settings, model_server


def _sources_of(events):
    first = next(e for e in events if e.type == "sources")
    return {r["source"] for r in first.data["results"]}, first.data


def test_notes_profile_retrieves_only_from_notes_and_chats(indexed):
    settings, server = indexed
    server.script(content=["Seven daily."])
    events = list(run_turn(TurnRequest("notes", RESTIC), settings))
    found, data = _sources_of(events)
    assert found and found <= {"vault", "roam", "chats"}
    assert any(s["citation"].startswith("vault:Backups/Restic.md") for s in data["sources"])
    assert events[-1].type == "done" and events[-1].data["profile"] == "notes"
    server.script(content=["The NAS."])
    events = list(run_turn(TurnRequest("varaverk", "what does the NAS hold layout"), settings))
    assert _sources_of(events)[0] == {"repo"}  # varaverk keeps to the repository


def test_a_named_source_overrides_the_profile_scope(indexed):
    settings, server = indexed
    server.script(content=["From the chat."])
    events = list(run_turn(TurnRequest("varaverk", RESTIC, source_name="chats"), settings))
    assert _sources_of(events)[0] == {"chats"}


def test_chat_escalates_to_notes_when_the_match_is_in_the_notes(indexed):
    settings, server = indexed
    server.script(content=["Seven daily."])
    events = list(run_turn(TurnRequest("chat", RESTIC), settings))
    [escalation] = [e for e in events if e.type == "profile"]
    assert escalation.data == {"profile": "notes", "from": "chat",
                               "reason": escalation.data["reason"]}
    assert {s["source"] for s in events[-1].data["sources"]} <= {"vault", "roam", "chats"}


def test_dock_status_lists_sources_and_similar_route(indexed):
    settings, _ = indexed
    from varaverk_dock.app import create_app

    client = create_app(settings).test_client()
    status = client.get("/api/status").get_json()
    names = [s["name"] for s in status["sources"]]
    assert names == ["repo", "vault", "roam", "chats"]
    assert all(s["chunks"] > 0 for s in status["sources"])
    body = client.get("/api/similar?target=vault:Backups/Restic.md%23Retention&k=3").get_json()
    assert len(body["results"]) == 3
    assert all(r["path"] != "vault:Backups/Restic.md" for r in body["results"])
    assert all(r["citation"] for r in body["results"])
    assert client.get("/api/similar?target=nowhere.md").status_code == 404
    assert client.get("/api/similar").status_code == 400


def test_an_index_of_the_first_schema_migrates_with_its_chunks_searchable(tmp_path):
    path = tmp_path / "index.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT "
                 "NULL, applied_at TEXT NOT NULL)")
    for statement in split_sql(MIGRATIONS[0][2]):
        conn.execute(statement)
    conn.execute("INSERT INTO schema_migrations VALUES (1, 'initial', 'then')")
    vec = np.array([1, 0, 0], dtype="<f4").tobytes()
    conn.execute("INSERT INTO chunks (path, kind, section, title, start_line, end_line, text, "
                 "context, vec) VALUES ('a.sh', 'header', 'PURPOSE', '', 1, 2, 'mirror the "
                 "photos', 'a.sh › PURPOSE', ?)", (vec,))
    conn.commit()
    conn.close()
    with Index.open(path) as idx:
        assert idx.meta()["schema_version"] == str(SCHEMA_VERSION)
        [(cid, _)] = idx.fts_search("photos", 5)
        [chunk] = idx.get_chunks([cid])
        assert chunk.source == "repo" and chunk.text == "mirror the photos"
        # Keywords are found lexically; deleting the chunk removes them from FTS5 too.
        idx.write(IndexChanges(new_chunks=[(Chunk("v:n.md", "note", "", "N", 1, 1, "body",
                                                  "v:n.md › N", meta={"keywords": ["zebra"]},
                                                  source="v"), np.array([0, 1, 0], "f4"))],
                               embedder=("?", "?", None)))
        assert [c.path for c in idx.get_chunks([i for i, _ in idx.fts_search("zebra", 5)])] \
            == ["v:n.md"]
        idx.write(IndexChanges(delete_paths=["v:n.md"]))
        assert idx.fts_search("zebra", 5) == []


def test_a_question_naming_a_note_alias_is_confident_though_aliases_are_not_embedded(tmp_path):
    from varaverk.documents.chunking import chunk_document
    from varaverk.retrieval.hits import Hit
    from varaverk.retrieval.options import RetrieverOptions
    from varaverk.retrieval.ranking import mark_aliases
    from varaverk.retrieval.search import Retriever
    from varaverk.index.store.stored_chunk import StoredChunk

    [chunk] = chunk_document("vault:Pi-hole.md", "note",
                             "---\naliases: dns sinkhole\n---\nPi-hole at .3\n")
    stored = StoredChunk(**{f: getattr(chunk, f) for f in chunk.__dataclass_fields__}, id=1)
    retriever = Retriever.__new__(Retriever)
    retriever.options = RetrieverOptions(min_score=0.37)
    hits = [Hit(stored, 1.0, dense=0.2, best_dense=0.2)]
    assert not retriever.confident(hits)  # the cosine alone is too low
    mark_aliases("What is the IP of the DNS  sinkhole?", hits)
    assert hits[0].alias and retriever.confident(hits)
    mark_aliases("what is a sinkhole", hits)
    assert not hits[0].alias
