"""AI_SOURCES end to end: a vault, an org-roam folder and chat exports beside the repository,
indexed into one index through a real model server on 127.0.0.1."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest

from tests.index.conftest import cli_env, embed_inputs, make_settings
from tests.notes.corpus import CANARY, REPO_README, make_notes_sources, sources_value
from tests.support.repos import git, make_repo
from varaverk.index.refresh import refresh
from varaverk.index.plan import plan
from varaverk.index.status import status as index_status
from varaverk.config import ConfigError, load_settings
from varaverk.named_sources import parse_sources
from varaverk.retrieval.search import Retriever
from varaverk.index.store.index import Index




@pytest.fixture
def lab(tmp_path, model_server):
    repo = make_repo(tmp_path / "repo", {"README.md": REPO_README})
    paths = make_notes_sources(tmp_path / "notes")
    settings = make_settings(repo, tmp_path, model_server, ai_sources=sources_value(paths))
    return settings, paths, model_server


def _rows(settings, sql):
    conn = sqlite3.connect(settings.index_path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_every_source_indexed_with_its_name_and_untracked_or_ignored_notes_never_read(lab):
    settings, paths, server = lab
    report = refresh(settings, progress=False)
    assert report.wrote and not report.failures
    by_source = dict(_rows(settings, "SELECT source, count(*) FROM chunks GROUP BY source"))
    assert set(by_source) == {"repo", "vault", "roam", "chats"}
    paths_stored = {p for (p,) in _rows(settings, "SELECT path FROM files")}
    assert "README.md" in paths_stored  # the repository's paths keep their form
    assert "vault:Backups/Restic.md" in paths_stored and "roam:20240110-pbs.org" in paths_stored
    assert "chats:ops.json" in paths_stored
    # The canaries: ignored and untracked files are not even listed, let alone read.
    assert not any("private" in p or "untracked" in p or "secret" in p for p in paths_stored)
    everything = json.dumps(_rows(settings, "SELECT text, context, keywords, meta FROM chunks"))
    assert CANARY not in everything
    assert not any(CANARY in t for t in embed_inputs(server))


def test_no_drawer_front_matter_key_or_media_placeholder_is_embedded(lab):
    settings, _, server = lab
    refresh(settings, progress=False)
    embedded = "\n".join(embed_inputs(server))
    for never in (":PROPERTIES:", ":ID:", ":ROAM_ALIASES:", ":END:", "6b1f0c2e", "tags:",
                  "aliases:", "#+title", "#+filetags", "#+begin_src", "SCHEDULED:",
                  "image omitted", "<attached:", "<Media omitted>", "end-to-end encrypted",
                  "added Ben", "[[", "]]"):
        assert never not in embedded, never
    # Links are written as their targets' titles, and code inside a src block stays text.
    assert "Guests are backed up by Proxmox Backup Server, see Proxmox Backup Server." in embedded
    assert "See Storage box for the account" in embedded
    assert "* this line is code, not a headline" in embedded


def test_an_alias_from_front_matter_or_a_drawer_matches_lexically_but_is_not_embedded(lab):
    settings, _, server = lab
    refresh(settings, progress=False)
    embedded = "\n".join(embed_inputs(server))
    assert "dns sinkhole" not in embedded and "hypervisor" not in embedded
    with Index.open(settings.index_path, readonly=True) as idx:
        found = {c.path for c in idx.get_chunks([cid for cid, _ in idx.fts_search("sinkhole", 5)])}
        assert found == {"vault:Network/Pi-hole.md"}
        found = {c.path for c in idx.get_chunks([cid for cid, _ in idx.fts_search("hypervisor", 5)])}
        assert found == {"roam:20240105-proxmox.org"}


def test_citations_name_the_source_and_chats_name_the_chat_and_span(lab):
    settings, _, _ = lab
    refresh(settings, progress=False)
    with Index.open(settings.index_path, readonly=True) as idx:
        cites = {c.citation for c in idx.chunks_for_path("roam:20240105-proxmox.org")}
        assert "roam:20240105-proxmox.org › Upgrades › Kernel pinning" in cites
        assert "roam:20240105-proxmox.org › Storage" in cites
        assert "roam:20240105-proxmox.org › Upgrades" not in cites  # no body of its own
        chat = {c.citation for c in idx.chunks_for_path("chats:WhatsApp Chat - Harbor crew.txt")}
        # Runs end at the week's silence (and at this embedder's small budget).
        prefix = "chats:WhatsApp Chat - Harbor crew.txt › Harbor crew › "
        assert all(c.startswith(prefix + "2024-03-0") for c in chat)
        assert prefix + "2024-03-09 10:15–10:16" in chat
        assert not any("03-02" in c and "03-09" in c for c in chat)
        [readme] = idx.chunks_for_path("README.md")
        assert readme.citation == "README.md › Harbor › Layout" and readme.source == "repo"


def test_source_filter_composes_with_kind(lab):
    settings, _, _ = lab
    refresh(settings, progress=False)
    retriever = Retriever(settings)
    hits = retriever.search("backups", 20, sources="roam")
    assert hits and {h.chunk.source for h in hits} == {"roam"}
    hits = retriever.search("backups", 20, kind="note", sources=("vault", "roam"))
    assert hits and {(h.chunk.source, h.chunk.kind) for h in hits} == {("vault", "note")}
    assert retriever.search("backups", 5, kind="chat", sources="vault") == []


def test_incremental_per_source_and_a_removed_source_loses_its_chunks(lab):
    settings, paths, server = lab
    refresh(settings, progress=False)
    again = refresh(settings, progress=False)
    assert not again.locked and not again.wrote  # nothing moved in any source
    note = paths["vault"] / "Power/UPS.md"
    note.write_text(note.read_text() + "\nThe battery is an RBC7.\n")
    server.requests.clear()
    touched = refresh(settings, progress=False)
    assert touched.indexed == 1 and touched.files_read == 1
    assert all("RBC7" in t or "UPS" in t for t in embed_inputs(server))
    git(paths["chats"], "commit", "-q", "--allow-empty", "-m", "moved")
    assert refresh(settings, progress=False).wrote  # HEAD of one source moved
    fewer = settings.replace(ai_sources=tuple(s for s in settings.ai_sources
                                              if not s.startswith("chats=")))
    report = refresh(fewer, progress=False)
    assert {p.split(":")[0] for p in report.deleted} == {"chats"}
    assert not _rows(settings, "SELECT 1 FROM chunks WHERE source = 'chats'")
    assert _rows(settings, "SELECT 1 FROM chunks WHERE source = 'vault'")


def test_status_lists_each_source(lab):
    settings, paths, _ = lab
    refresh(settings, progress=False)
    info = index_status(settings)
    rows = {r["name"]: r for r in info["sources"]}
    assert list(rows) == ["repo", "vault", "roam", "chats"]
    assert info["repository"]["tracked"] == 1 and rows["repo"]["tracked"] == 1
    assert plan(settings)["sources"] == ["repo", "vault", "roam", "chats"]
    assert rows["vault"]["type"] == "notes" and rows["chats"]["type"] == "chats"
    assert rows["roam"]["files"] == 3 and rows["roam"]["chunks"] > 3
    assert not any(r["behind"] for r in rows.values())
    (paths["roam"] / "20240112-certs.org").write_text("#+title: Certificates\n* Gone\nx\n")
    rows = {r["name"]: r for r in index_status(settings)["sources"]}
    assert rows["roam"]["behind"] and not rows["vault"]["behind"]


def test_cli_search_and_similar_with_sources(lab):
    settings, paths, _ = lab
    env = cli_env(settings, AI_SOURCES=" ".join(settings.ai_sources))
    index = subprocess.run([sys.executable, "-m", "varaverk_tools.ai_index"], env=env,
                           capture_output=True, text=True, timeout=300)
    assert index.returncode == 0, index.stderr
    status = subprocess.run([sys.executable, "-m", "varaverk_tools.ai_index", "--status"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert "sources:" in status.stdout and "roam" in status.stdout
    out = subprocess.run([sys.executable, "-m", "varaverk_tools.ai_query", "--search", "--json",
                          "--source", "chats", "who wanted to move restic to the NAS"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["filters"]["source"] == "chats"
    assert {r["source"] for r in data["results"]} == {"chats"}
    sim = subprocess.run([sys.executable, "-m", "varaverk_tools.ai_query", "--json", "--similar",
                          "vault:Backups/Restic.md#Retention"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert sim.returncode == 0, sim.stderr
    results = json.loads(sim.stdout)["results"]
    assert results and all(r["path"] != "vault:Backups/Restic.md" for r in results)
    bad = subprocess.run([sys.executable, "-m", "varaverk_tools.ai_query", "--similar",
                          "vault:Backups/Restic.md#Nope"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and "Retention" in bad.stderr


def test_sources_setting_is_validated(tmp_path):
    with pytest.raises(ValueError, match="NAME=TYPE:PATH"):
        parse_sources(["vault"])
    with pytest.raises(ValueError, match="TYPE must be one of"):
        parse_sources(["vault=wiki:/srv/v"])
    with pytest.raises(ValueError, match="'repo' is the homelab"):
        parse_sources(["repo=notes:/srv/v"])
    with pytest.raises(ValueError, match="absolute"):
        parse_sources(["vault=notes:srv/v"])
    with pytest.raises(ValueError, match="twice"):
        parse_sources(["v=notes:/a", "v=chats:/b"])
    with pytest.raises(ConfigError, match="AI_SOURCES"):
        load_settings(environ={"AI_SOURCES": "vault=notes"})
    settings = load_settings(environ={"AI_SOURCES": "vault=notes:/srv/vault chats=chats:/srv/c"})
    assert [s.name for s in parse_sources(settings.ai_sources)] == ["vault", "chats"]
