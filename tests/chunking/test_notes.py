"""Table tests of the notes and chat chunkers: org-mode, Obsidian Markdown, chat exports."""

from __future__ import annotations

import datetime as dt

import pytest

from varaverk.documents.chat_exports import parse_json_export, parse_whatsapp
from varaverk.documents.chunking import chunk_document
from varaverk.documents.org_notes import aliases, org_ids, parse_org

ORG_CASES = [
    # (org text, [(level, title, tags)] of the headlines found)
    ("* A\n** B :x:y:\n*** C\n", [(1, "A", []), (2, "B", ["x", "y"]), (3, "C", [])]),
    ("* TODO [#A] Fix it :ops:\n", [(1, "Fix it", ["ops"])]),
    ("#+begin_src sh\n* not a headline\n#+end_src\n* Real\n", [(1, "Real", [])]),
    ("#+BEGIN_EXAMPLE\n** nor this\n#+END_EXAMPLE\n", []),
    ("*bold* is not a headline\n* Yes\n", [(1, "Yes", [])]),
    ("* Time 10:30 is not a tag\n", [(1, "Time 10:30 is not a tag", [])]),
]


@pytest.mark.parametrize("text,expected", ORG_CASES)
def test_org_headlines(text, expected):
    found = [(n.level, n.title, n.tags) for n in parse_org(text).nodes if n.level]
    assert found == expected


def test_org_drawers_and_keywords_are_metadata_never_text():
    doc = parse_org(":PROPERTIES:\n:ID: abc\n:ROAM_ALIASES: \"Two words\" one\n:END:\n"
                    "#+title: T\n#+filetags: :a:b:\nbody\n* H\n:PROPERTIES:\n:ID: h1\n:END:\n"
                    ":LOGBOOK:\nCLOCK: [2024-01-01]\n:END:\nSCHEDULED: <2024-01-02>\ntext\n")
    lead, head = doc.nodes
    assert lead.properties == {"ID": "abc", "ROAM_ALIASES": "\"Two words\" one"}
    assert aliases(lead.properties) == ["Two words", "one"]
    assert doc.keywords == {"TITLE": "T", "FILETAGS": ":a:b:"}
    assert [t for _, t in lead.lines] == ["body"]
    assert head.properties == {"ID": "h1"} and [t for _, t in head.lines if t] == ["text"]


def test_org_chunks_sections_links_and_keywords():
    text = ("#+title: Note\n#+filetags: :lab:\n* Top :t1:\n** Leaf\nsee [[id:X][old]] and "
            "[[id:Y]] and [[https://x.invalid][site]] and [[file:a.org]]\n")
    [leaf] = chunk_document("roam:n.org", "org", text, links={"id:X": "Target"})
    assert (leaf.section, leaf.title) == ("Top", "Leaf")
    assert leaf.context == "roam:n.org › Note › Top › Leaf"
    assert leaf.text == "see Target and Y and site and a.org"
    assert leaf.meta["keywords"] == ["lab", "t1"] and (leaf.start_line, leaf.end_line) == (4, 5)
    assert org_ids("n.org", ":PROPERTIES:\n:ID: F\n:END:\n#+title: File\n* H\n:PROPERTIES:\n"
                   ":ID: G\n:END:\n") == {"F": "File", "G": "H"}


OBSIDIAN = """---
title: Restic
tags: backup, homelab
aliases: [Snapshots]
---
Intro with [[Other|shown]], [[other#Setup]], ![[pic.png]] and [[#Local]]. #ops %%hidden%%
#notaheading
> [!warning] Careful
> keep it

## Setup
body
"""


def test_obsidian_note():
    lead, setup = chunk_document("vault:Restic.md", "note", OBSIDIAN, links={"other": "Other T"})
    assert lead.title == "Restic" and lead.context == "vault:Restic.md › Restic"
    assert lead.text.splitlines() == [
        "Intro with shown, Other T › Setup, pic.png and Local. #ops ", "#notaheading",
        "> Warning: Careful", "> keep it"]
    assert lead.meta["keywords"] == ["backup", "homelab", "Snapshots", "ops", "notaheading"]
    assert "tags" not in lead.embed_text and "aliases" not in lead.embed_text
    assert (setup.title, setup.context) == ("Setup", "vault:Restic.md › Restic › Setup")
    [untitled] = chunk_document("vault:Plain note.md", "note", "text only\n")
    assert untitled.title == "Plain note"


WHATSAPP_CASES = [
    # (line, sender, when, text); None: not a message (a system line or a placeholder)
    ("[02/03/2024, 19:05:02] Anna: hello", ("Anna", dt.datetime(2024, 3, 2, 19, 5, 2), "hello")),
    ("02/03/2024, 19:05 - Ben: hi there", ("Ben", dt.datetime(2024, 3, 2, 19, 5), "hi there")),
    ("2/3/24, 7:05 PM - Ben: pm", ("Ben", dt.datetime(2024, 3, 2, 19, 5), "pm")),
    ("[02/03/2024, 19:05:02] Anna: \u200eimage omitted", None),
    ("02/03/2024, 19:05 - Ben: <Media omitted>", None),
    ("[02/03/2024, 19:05:02] Anna: <attached: 0001-PHOTO.jpg>", None),
    ("02/03/2024, 19:05 - Ben: IMG-001.jpg (file attached)", None),
    ("02/03/2024, 19:05 - Anna added Ben", None),
    ("[02/03/2024, 19:05:02] Crew: Anna changed the subject", None),
    ("[02/03/2024, 19:05:02] Anna: Messages and calls are end-to-end encrypted.", None),
]


@pytest.mark.parametrize("line,expected", WHATSAPP_CASES)
def test_whatsapp_lines(line, expected):
    found = [(m.sender, m.when, m.text) for m in parse_whatsapp("chats:Crew.txt", line + "\n")]
    assert found == ([expected] if expected else [])


def test_whatsapp_multiline_message_and_chat_name():
    text = ("[02/03/2024, 19:05:02] Anna: first line\nsecond line\n"
            "[02/03/2024, 19:06:00] Ben: ok\n")
    messages = parse_whatsapp("chats:WhatsApp Chat with Crew.txt", text)
    assert [(m.text, m.line, m.chat) for m in messages] == [
        ("first line\nsecond line", 1, "Crew"), ("ok", 3, "Crew")]


def test_json_export_and_runs_split_at_silence_and_budget():
    items = [{"chat": "Ops", "sender": "A", "timestamp": f"2024-05-01T08:0{i}:00",
              "text": f"message {i} " + "x" * 40} for i in range(6)]
    items.append({"chat": "Ops", "sender": "B", "timestamp": "2024-05-02T08:00:00",
                  "text": "a day later"})
    items.append({"chat": "Ops", "sender": "B", "timestamp": "2024-05-02T08:01:00",
                  "text": "image omitted"})
    import json
    text = json.dumps(items, indent=1)
    assert [m.text for m in parse_json_export("c.json", text)][-1] == "a day later"
    chunks = chunk_document("chats:c.json", "chat", text, max_tokens=300)
    assert all(len(c.embed_text) <= 300 for c in chunks)
    assert chunks[-1].title == "2024-05-02 08:00" and chunks[-1].text.endswith("B: a day later")
    assert len(chunks) >= 3 and all(c.section == "Ops" for c in chunks)
    first = chunks[0]
    assert first.title.startswith("2024-05-01 08:00–") and first.meta["participants"] == ["A"]
    with pytest.raises(ValueError):
        parse_json_export("c.json", "{}")
