"""The memory file: turns kept verbatim and never rewritten, triplets with their facts,
redaction before storing, forgetting that removes the words, no mixing of embedders."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from tests.memory.conftest import MOVER_TALK, NAS_TALK, turn
from varaverk.memory.store import MemoryMismatch, MemoryStore
from varaverk.memory.triplets import windows


def test_windows_overlap_by_one_turn_and_skip_gaps():
    assert windows([]) == []
    assert windows([0]) == [(0, 0)]
    assert windows([0, 1, 2]) == [(0, 2)]
    assert windows([0, 1, 2, 3, 4, 5]) == [(0, 2), (2, 4), (4, 5)]
    assert windows([3, 4, 7]) == [(3, 7)]


def test_turns_are_stored_verbatim_and_never_rewritten(memory):
    added = memory.remember("c1", NAS_TALK)
    assert [t.seq for t in added] == [0, 1, 2, 3]
    assert [t.turn_ref for t in added] == ["c1:0", "c1:1", "c1:2", "c1:3"]
    stored = memory.store.turns("c1")
    assert [t.text for t in stored] == [t["text"] for t in NAS_TALK]
    conn = sqlite3.connect(memory.store.path)
    with pytest.raises(sqlite3.IntegrityError, match="never rewritten"):
        conn.execute("UPDATE turns SET text = 'changed' WHERE seq = 0")
    conn.close()


def test_a_turn_ref_already_stored_is_not_added_again(memory):
    memory.remember("c1", [turn("user", "one two three", "2026-01-01T00:00:00", "a")])
    again = memory.remember("c1", [turn("user", "one two three", "2026-01-01T00:00:00", "a")])
    assert again == [] and len(memory.store.turns("c1")) == 1


def test_secrets_are_redacted_before_anything_is_stored(memory):
    memory.remember("c1", [
        turn("user", "Remember that the admin password is Tr0ub4dor-3xK please.",
             "2026-03-01T10:00:00"),
        turn("assistant", "Use the token ghp_abcdefghijklmnopqrstuvwxyz0123456789 then.",
             "2026-03-01T10:00:02")])
    memory.digest_pending()
    raw = memory.store.path.read_bytes() + memory.store.path.with_name("memory.db-wal") \
        .read_bytes()
    assert b"Tr0ub4dor" not in raw and b"ghp_abcdef" not in raw
    texts = [t.text for t in memory.store.turns("c1")]
    assert texts[0] == "Remember that the admin password is [redacted] please."
    assert "[redacted]" in texts[1]


def test_digest_writes_each_triplet_with_facts_and_one_recollection(memory):
    memory.remember("c1", NAS_TALK)
    memory.remember("c2", MOVER_TALK)
    assert memory.digest_pending() == 3
    rows = memory.store.triplets()
    assert [(r.conversation, r.first_seq, r.last_seq) for r in rows] == \
        [("c1", 0, 2), ("c1", 2, 3), ("c2", 0, 1)]
    first = memory.store.facts(rows[0].id)
    assert first[0].statement == "The NAS is the Synology at 192.168.1.20."
    assert first[0].speaker == "user" and first[0].type == "fact"
    assert memory.store.recollection(rows[0].id).startswith("I remember (2026-03-02) user:")
    assert memory.digest_pending() == 0  # nothing left to do


def test_a_short_last_triplet_is_digested_again_when_the_conversation_grows(memory):
    memory.remember("c1", NAS_TALK[:2])
    memory.digest_pending()
    assert [(r.first_seq, r.last_seq) for r in memory.store.triplets()] == [(0, 1)]
    memory.remember("c1", NAS_TALK[2:])
    memory.digest_pending()
    assert [(r.first_seq, r.last_seq) for r in memory.store.triplets()] == [(0, 2), (2, 3)]
    facts = [f.statement for r in memory.store.triplets() for f in memory.store.facts(r.id)]
    assert len(facts) == len(set(facts)) + 1  # turn 2 is in both triplets, nothing else twice


def _count(store: MemoryStore, table: str) -> int:
    return sqlite3.connect(store.path).execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def test_forget_a_triplet_removes_its_turns_facts_and_vectors(memory):
    memory.remember("c1", NAS_TALK)
    memory.remember("c2", MOVER_TALK)
    memory.digest_pending()
    hot = memory.store.triplets("c1")[0]
    assert memory.store.forget_triplet(hot.id) == 3
    assert [t.seq for t in memory.store.turns("c1")] == [3]
    assert memory.store.triplets("c1") == []  # the neighbour quoted turn 2: gone too
    memory.digest_pending()  # the turn left over is digested on its own
    assert [(r.first_seq, r.last_seq) for r in memory.store.triplets("c1")] == [(3, 3)]
    assert _count(memory.store, "facts") == len(memory.store.fact_table().fact_ids)
    raw = memory.store.path.read_bytes() + memory.store.path.with_name("memory.db-wal") \
        .read_bytes()
    assert b"Synology" not in raw and b"synology" not in raw  # the FTS5 index forgot too


def test_forget_a_conversation_and_everything(memory):
    memory.remember("c1", NAS_TALK)
    memory.remember("c2", MOVER_TALK)
    memory.digest_pending()
    assert memory.store.forget_conversation("c2") == 2
    assert memory.store.triplets("c2") == [] and memory.store.turns("c2") == []
    assert memory.store.forget_all() == 4
    for table in ("turns", "triplets", "facts", "recollections"):
        assert _count(memory.store, table) == 0
    assert "embed_model" not in memory.store.meta()


def test_facts_of_another_embedder_are_refused(memory, memory_settings):
    from varaverk.memory.host_memory import HostMemory

    memory.remember("c1", NAS_TALK)
    memory.digest_pending()
    memory.close()
    other = memory_settings.replace(ai_embed_model="other-model")
    with HostMemory(other) as mem:
        mem.remember("c2", MOVER_TALK)  # turns are kept whatever the embedder
        with pytest.raises(MemoryMismatch,
                           match=r"ollama/bow \(1024 dims\); this run uses ollama/other-model"):
            mem.digest_pending()
        with pytest.raises(MemoryMismatch) as refused:
            mem.recall("where is the NAS?")
        assert "run ai-memory redigest" in refused.value.one_line()
        assert mem.store.drop_digests() == 2
        mem.digest_pending()
        assert mem.store.meta()["embed_model"] == "other-model"


def _stored_facts(store: MemoryStore) -> list[tuple[int, int]]:
    return sqlite3.connect(store.path).execute(
        "SELECT id, triplet FROM facts ORDER BY id").fetchall()


def test_the_fact_matrix_follows_every_write_of_any_store_of_the_file(memory, memory_settings):
    from varaverk.memory.host_memory import HostMemory

    memory.remember("c1", NAS_TALK[:2])
    memory.digest_pending()
    before = memory.store.fact_table()
    with HostMemory(memory_settings) as other:  # another store, as the dock opens per turn
        other.remember("c1", NAS_TALK[2:])      # the short last triplet grows: replaced
        other.remember("c2", MOVER_TALK)
        other.digest_pending()
    table = memory.store.fact_table()
    assert list(zip(table.fact_ids.tolist(), table.triplet_ids.tolist())) == \
        _stored_facts(memory.store)
    assert len(table.fact_ids) > len(before.fact_ids)
    assert not set(before.triplet_ids.tolist()) & set(table.triplet_ids.tolist())
    vectors = memory.embedder.embed([f.statement for r in memory.store.triplets()
                                     for f in memory.store.facts(r.id)]).vectors
    assert np.allclose(table.matrix, np.vstack(vectors), atol=1e-6)

    memory.store.forget_conversation("c2")
    table = memory.store.fact_table()
    assert list(zip(table.fact_ids.tolist(), table.triplet_ids.tolist())) == \
        _stored_facts(memory.store)
    assert set(table.codes) >= {"c1"} and table.matrix.shape == (len(table.fact_ids), 1024)


def test_the_fact_matrix_grows_in_place_and_never_changes_a_table_handed_out(tmp_path):
    from varaverk.memory.digest import Digest, Fact
    from varaverk.memory.fact_matrix import FactTables

    rng = np.random.default_rng(7)
    store = MemoryStore.open(tmp_path / "memory.db")

    def add(conversation: str, triplets: int) -> None:
        store.add_turns(conversation, [turn(r, f"{conversation} said {i}", "2026-03-02T10:00:00")
                                       for i, r in enumerate(["user", "assistant"] * triplets)])
        for t in range(triplets):
            vecs = rng.standard_normal((3, 8)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            store.write_digest(conversation, 2 * t, 2 * t + 1,
                               Digest([Fact(f"fact {i}", "user") for i in range(3)], "r"), vecs,
                               ("local", "test", 8), "digested")

    def fresh():  # the table as a first read of the file makes it
        return FactTables().get("fresh", store.generation(), 8, store._read)

    handed_out = []
    for step, conversation in enumerate(["a", "b", "c", "d", "e"]):
        add(conversation, 400 if step == 0 else 3)  # the first fills the buffer's spare rows
        table = store.fact_table()
        want = fresh()
        assert table.fact_ids.tolist() == want.fact_ids.tolist()
        assert np.array_equal(table.matrix, want.matrix)
        handed_out.append((table, table.matrix.copy()))
        if step == 2:
            store.forget_conversation("b")
            assert "b" not in {c for c, *_ in store.conversations()}
    for table, copy in handed_out:
        assert np.array_equal(table.matrix, copy)  # appends never wrote into a view given out
    last = store.fact_table()
    assert len(last.fact_ids) == 3 * (400 + 3 + 3 + 3) and last.matrix.shape == (1227, 8)
    store.close()


def test_opening_a_new_memory_file_from_many_threads_at_once(tmp_path):
    """The dock's remember thread creates memory.db while a request opens it: switching a
    file being created to WAL must wait for the other opener, not fail "database is locked"."""
    import threading

    for attempt in range(20):
        path = tmp_path / f"m{attempt}" / "memory.db"
        barrier, failures = threading.Barrier(6), []

        def opener():
            barrier.wait()
            try:
                MemoryStore.open(path).close()
            except Exception as exc:  # collected: the assertion below names it
                failures.append(exc)

        threads = [threading.Thread(target=opener) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failures == [], failures
