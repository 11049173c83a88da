"""Issue 21's hostile files, one test each: front matter alias bombs, deep nesting, and the
chat exports whose parse was quadratic. Each failed on the parsers before they were bounded.

Linear-time checks compare the CPU time of an input of size N with one of 4N (best of a
few runs, so a busy machine does not decide): linear work takes about 4 times as long,
quadratic work about 16 times; the bound between them is generous.
"""

from __future__ import annotations

import json
import logging
import time

import pytest

from varaverk.documents.chat_exports import parse_json_export
from varaverk.documents.chunking import chunk_document
from varaverk.documents.markdown_sections import parse_front_matter

LINEAR_RATIO = 8.0  # time(4N) / time(N): linear is about 4, quadratic about 16


def best_seconds(work, repeat: int = 3) -> float:
    """The shortest of ``repeat`` timings of ``work()``, in CPU seconds of this process (what
    other processes on a shared machine take does not count)."""
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return best


def assert_linear(make, n: int, kind: str, path: str, count=None, work=None) -> None:
    """Chunking ``make(4n)`` takes at most ``LINEAR_RATIO`` times as long as ``make(n)``
    (``count``: the token counter, None for characters; ``work(path, text)``: what is timed
    instead of chunking)."""
    small, large = make(n), make(4 * n)

    def chunk(text):
        if work is not None:
            return work(path, text)
        return chunk_document(path, kind, text, count_tokens=count)
    chunk(small)  # warm up imports and caches
    t_small = best_seconds(lambda: chunk(small))
    t_large = best_seconds(lambda: chunk(large), repeat=2)
    assert t_large <= LINEAR_RATIO * max(t_small, 0.005), (t_small, t_large)


# --- front matter ---------------------------------------------------------------------------

ALIAS_BOMB = "---\ntags: &a [*a]\n---\n# Title\nThe body.\n"  # 35 bytes of front matter


def laughs(levels: int) -> str:
    """A billion-laughs front matter: each level lists the one before nine times."""
    out = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    names = "abcdefghijklmnop"
    for prev, name in zip(names, names[1:levels]):
        out.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(out)


@pytest.mark.parametrize("kind", ["readme", "note"])
def test_a_recursive_alias_in_front_matter_gives_no_metadata_and_a_warning(kind, caplog):
    with caplog.at_level(logging.WARNING):
        chunks = chunk_document("notes/bomb.md", kind, ALIAS_BOMB)
    assert [c.text for c in chunks] == ["The body."]
    assert "tags" not in chunks[0].meta
    assert "alias" in chunks[0].meta["front_matter_error"]
    assert any("notes/bomb.md" in r.getMessage() and "front matter" in r.getMessage()
               for r in caplog.records)


def test_billion_laughs_is_refused_before_it_is_expanded():
    small = parse_front_matter(laughs(5))  # 9**5 leaves: expanded by the old parser
    assert set(small) == {"front_matter_error"}
    assert "alias" in small["front_matter_error"]
    full = laughs(9)
    assert len(full.encode()) < 470  # the 461-byte bomb of the issue
    started = time.perf_counter()
    assert set(parse_front_matter(full)) == {"front_matter_error"}
    assert time.perf_counter() - started < 5


def test_aliases_that_expand_to_little_still_read():
    meta = parse_front_matter("base: &b {owner: anna, port: 8080}\nweb: *b\ntags: [a, b]\n")
    assert meta == {"base": {"owner": "anna", "port": 8080},
                    "web": {"owner": "anna", "port": 8080}, "tags": ["a", "b"]}


@pytest.mark.parametrize("raw", [
    "a: " + "[" * 50_000 + "]" * 50_000,
    "a: " + "{b: " * 5_000 + "c" + "}" * 5_000,
    "".join(" " * i + f"k{i}:\n" for i in range(500)),
], ids=["flow-lists", "flow-maps", "block-maps"])
def test_front_matter_nested_too_deep_gives_no_metadata(raw):
    meta = parse_front_matter(raw)
    # libyaml itself refuses 50,000 open brackets (a syntax error: the text is kept).
    assert set(meta) - {"front_matter"} == {"front_matter_error"}
    assert "deep" in meta["front_matter_error"] or "flow level" in meta["front_matter_error"]


def test_front_matter_larger_than_the_bound_gives_no_metadata():
    raw = "\n".join(f"key{i}: {'v' * 60}" for i in range(10_000))  # about 700 kB
    meta = parse_front_matter(raw)
    assert set(meta) == {"front_matter_error"}
    assert "larger" in meta["front_matter_error"]


def test_an_impossible_date_in_front_matter_is_an_error_not_a_crash(caplog):
    text = "---\ntitle: Backups\ndate: 2024-02-30\n---\n# Restic\nRuns nightly.\n"
    with caplog.at_level(logging.WARNING):
        chunks = chunk_document("posts/backups.md", "doc", text)
    assert [c.text for c in chunks] == ["Runs nightly."]
    assert chunks[0].meta["front_matter"] == "title: Backups\ndate: 2024-02-30"
    assert "day is out of range" in chunks[0].meta["front_matter_error"]
    assert "posts/backups.md" in caplog.text


# --- JSON chat exports ----------------------------------------------------------------------

def test_a_json_export_nested_100k_deep_is_a_clear_error():
    with pytest.raises(ValueError, match="nested deeper"):
        parse_json_export("chats:deep.json", "[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="nested deeper"):
        parse_json_export("chats:deep.json", '[{"text": ' + '{"a":' * 100_000 + "1"
                          + "}" * 100_000 + "}]")


def test_a_json_export_with_nested_fields_reads_its_messages():
    text = json.dumps([{"chat": "Ops", "sender": "A", "timestamp": "2024-05-01T08:00:00",
                        "text": "restic runs at 02:00", "reactions": [{"by": ["B"]}]},
                       {"chat": "Ops", "sender": {"id": [1]}, "timestamp": "2024-05-01T08:01",
                        "text": ["not", "a", "string"]}])
    assert [(m.sender, m.text) for m in parse_json_export("c.json", text)] == [
        ("A", "restic runs at 02:00")]


def _json_chat(n: int) -> str:
    items = [{"chat": "Ops", "sender": f"p{i % 3}",
              "timestamp": f"2024-03-{1 + i // 1440:02d}T{i // 60 % 24:02d}:{i % 60:02d}:00",
              "text": "the nas backup finished, the offsite copy starts at two"}
             for i in range(n)]
    return json.dumps(items, indent=1)


def test_json_chat_export_parses_in_linear_time():
    assert_linear(_json_chat, 5_000, "chat", "chats:ops.json", work=parse_json_export)


# --- WhatsApp exports -----------------------------------------------------------------------

def _whatsapp_messages(n: int) -> str:
    return "\n".join(f"[02/03/2024, {i // 60 % 24:02d}:{i % 60:02d}:00] Anna: message {i} "
                     "about the backups" for i in range(n))


def _whatsapp_pasted_log(n: int) -> str:
    return "[02/03/2024, 19:04:00] Anna: the log:\n" + "\n".join(
        f"Mar  2 19:0{i % 10} nas restic[{i}]: snapshot {i:08x} saved" for i in range(n))


def _whatsapp_one_long_line(n: int) -> str:
    return "[02/03/2024, 19:04:00] Anna: " + " ".join(f"word{i}" for i in range(n))


@pytest.mark.parametrize("make, n", [(_whatsapp_messages, 1_000), (_whatsapp_pasted_log, 500),
                                     (_whatsapp_one_long_line, 2_000)],
                         ids=["messages", "pasted-log", "one-long-line"])
def test_whatsapp_export_chunks_in_linear_time(make, n, real_count_tokens):
    assert_linear(make, n, "chat", "chats:WhatsApp Chat with Crew.txt", real_count_tokens)


def test_a_pasted_log_keeps_every_line_in_order():
    chunks = chunk_document("chats:Crew.txt", "chat", _whatsapp_pasted_log(400))
    text = " ".join(" ".join(c.text for c in chunks).split())  # parts are cut at spaces
    positions = [text.find(f"snapshot {i:08x} saved") for i in range(400)]
    assert -1 not in positions and positions == sorted(positions)


# --- huge lines -----------------------------------------------------------------------------

def _markdown_one_line(n: int) -> str:
    return "# Notes\n" + " ".join(f"token{i}" for i in range(n)) + "\n"


def test_a_markdown_paragraph_on_one_huge_line_chunks_in_linear_time(real_count_tokens):
    assert_linear(_markdown_one_line, 2_000, "readme", "README.md", real_count_tokens)


# --- lone surrogates ------------------------------------------------------------------------

def test_lone_surrogates_become_replacement_characters_and_pairs_join():
    from varaverk.documents.chunks import without_surrogates
    from varaverk.documents.markdown_sections import _json_safe

    assert without_surrogates("half \ud83d, whole \ud83d\ude00, tail \ude00") == \
        "half \ufffd, whole \U0001f600, tail \ufffd"
    assert _json_safe({"t\ud800": ["\ud800"]}) == {"t\ufffd": ["\ufffd"]}
    chunks = chunk_document("a.md", "readme", "# Head \ud800\nBody \udfff.\n")
    assert (chunks[0].title, chunks[0].text) == ("Head \ufffd", "Body \ufffd.")


# --- patterns that backtracked (found by tests/chunking/test_fuzz.py) -----------------------

@pytest.mark.parametrize("kind, path, make", [
    ("org", "roam:a.org", lambda n: "* a" + " " * n + "b\n"),
    ("org", "roam:a.org", lambda n: "#+title: a" + " " * n + "b\n* h\ntext\n"),
    ("org", "roam:a.org", lambda n: "* h\n:PROPERTIES:\n:ID: a" + " " * n + "b\n:END:\ntext\n"),
    ("template", "Deployment/a.template", lambda n: "#" * n + "\nKEY=1\n"),
    ("template", "a.env", lambda n: "#+title:" + " " * n + "x\nKEY=1\n"),
    ("template", "a.env", lambda n: "# == x " + "=" * n + "y\nKEY=1\n"),
    ("header", "tools/a.sh", lambda n: "#!/bin/sh\n# Sync.\n\nrun\n# == x " + "=" * n + "y\n"
     "# one\n"),
    ("readme", "README-a.md", lambda n: "# A\n\nimport" + " " * n + "x\n"),
], ids=["org-headline", "org-keyword", "org-property", "template-rule", "template-keyword",
        "template-banner", "script-banner", "mdx-import"])
def test_long_runs_inside_a_line_cost_linear_time(kind, path, make):
    assert_linear(make, 4_000, kind, path)


@pytest.mark.parametrize("text", ["-" * 50_000 + "x", "+" * 50_000 + "x", "~" * 50_000 + "x"],
                         ids=["minus", "plus", "invert"])
def test_a_python_script_the_parser_refuses_is_read_without_its_usage(text):
    # Python's parser raises MemoryError or RecursionError on these, not SyntaxError.
    source = '#!/usr/bin/env python3\n"""PURPOSE:\n  Sync the mirror.\n"""\n' + text + "\n"
    chunks = chunk_document("tools/sync.py", "header", source)
    assert any("Sync the mirror." in c.text for c in chunks)


# --- huge headings --------------------------------------------------------------------------

def _huge_heading(mark: str):
    def make(n: int) -> str:
        return (f"{mark} " + " ".join(f"word{i}" for i in range(n)) + "\n"
                + f"{mark}{mark[0]} s\nbody\n" * (n // 20))
    return make


@pytest.mark.parametrize("kind, path, mark", [("readme", "README.md", "#"),
                                              ("org", "roam:a.org", "*")])
def test_a_heading_thousands_of_words_long_costs_linear_time_and_loses_no_text(
        kind, path, mark, real_count_tokens):
    # Every section under it carried the whole heading in its context, section and trail.
    assert_linear(_huge_heading(mark), 1_000, kind, path, real_count_tokens)
    chunks = chunk_document(path, kind, _huge_heading(mark)(2_000))
    assert max(len(c.section) + len(c.title) for c in chunks) <= 2 * 1_001
    text = " ".join(" ".join(c.text for c in chunks).split())
    assert all(f"word{i} " in text for i in (0, 999, 1_999))


# --- byte order marks -----------------------------------------------------------------------

def test_every_byte_order_mark_is_dropped_not_only_the_first():
    # Two leading BOMs (a tool that adds one to a file that had one), and files joined with
    # cat, each with its own: the front matter and both headings must still be found.
    text = "\ufeff\ufeff---\ntitle: T\n---\n# A\nx\n\ufeff# B\ny\ufeff\n"
    chunks = chunk_document("notes/joined.md", "readme", text)
    assert [(c.title, c.text) for c in chunks] == [("A", "x"), ("B", "y")]
    assert chunks[0].meta == {"title": "T"}


# --- YAML items named in prose (varaverk.documents.yaml_named_items) ------------------------

def _staircases(n: int) -> str:
    """n lines: staircases of named items nested deeper than the open-item bound, each
    followed by deep comments and closed at once by a line at column 0."""
    step = "".join(" " * (2 * d) + f"- name: Step number {d} of many\n" for d in range(60))
    deep = " " * 200 + "# still inside the deepest step\n"
    block = step + deep * 60 + "next: 1\n"
    return block * max(1, n // 121)


@pytest.mark.parametrize("make", [
    _staircases,
    lambda n: "- name: Run " + "{" * n + " x\n  command: true\n",
    lambda n: "- name: Run " + "{{ a }} " * (n // 8) + "now\n  command: true\n",
    lambda n: "# lead\n" + "- name: Install the package\n  apt: name=x\n" * (n // 2),
    lambda n: "tasks:\n" + "\n" * n + "  - name: Install the package\n    apt: x\n",
], ids=["nested-staircases", "open-braces", "jinja-spans", "many-tasks", "blank-run"])
def test_named_yaml_items_cost_linear_time(make):
    assert_linear(make, 4_000, "template", "roles/a/tasks/main.yml")
