"""Markdown chunking: headings by markdown-it-py, front matter as metadata, trails, tiny sections."""

from __future__ import annotations

from varaverk.documents.chunks import SEP, heading_path
from varaverk.documents.chunking import chunk_document
from tests.chunking.support import read_fixture

BIG = 100_000


def md(text: str, path: str = "README.md", kind: str = "readme", **kw):
    return chunk_document(path, kind, text, max_tokens=kw.pop("max_tokens", BIG), **kw)


def test_atx_and_setext_headings_with_trail_and_lines():
    text = ("Tool\n====\n\nIntro.\n\nInstall\n-------\nRun make.\n\n### Details ###\nMore.\n\n"
            "## Usage\nCall it.\n")
    chunks = md(text)
    assert [(c.section, c.title, c.text) for c in chunks] == [
        ("", "Tool", "Intro."),
        ("Tool", "Install", "Run make."),
        ("Tool > Install", "Details", "More."),
        ("Tool", "Usage", "Call it.")]
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 4), (6, 8), (10, 11), (13, 14)]
    assert chunks[2].context == f"README.md{SEP}Tool{SEP}Install{SEP}Details"
    assert chunks[2].citation == f"README.md{SEP}Tool > Install{SEP}Details"


def test_text_before_first_heading_takes_front_matter_title():
    text = "---\ntitle: Zones\nid: zones\n---\n\nZones are areas.\n\n## Zone Inertia\nFrames to wait.\n"
    lead, inertia = md(text, "docs/zones.md", "doc")
    assert (lead.section, lead.title, lead.text) == ("", "Zones", "Zones are areas.")
    assert lead.meta == {"title": "Zones", "id": "zones"}
    assert (lead.start_line, lead.end_line) == (6, 6)
    # Without an H1 the page title leads the context trail, not the section.
    assert inertia.context == f"docs/zones.md{SEP}Zones{SEP}Zone Inertia"
    assert (inertia.section, inertia.title) == ("", "Zone Inertia")


def test_front_matter_with_h1_does_not_repeat_the_title():
    text = "---\ntitle: Media jobs\nlast_reviewed: 2026-02-14\n---\n# harborlab Media\nText.\n"
    (chunk,) = md(text)
    assert chunk.context == f"README.md{SEP}harborlab Media"
    assert chunk.meta == {"title": "Media jobs", "last_reviewed": "2026-02-14"}


def test_broken_front_matter_is_kept_as_metadata_not_text():
    text = "---\ntitle: [unclosed\n---\n# H\nBody.\n"
    (chunk,) = md(text)
    assert chunk.text == "Body." and chunk.meta["front_matter"] == "title: [unclosed"
    assert "front_matter_error" in chunk.meta


def test_heading_text_is_kept_as_written():
    text = "## `environment_vars`\nSet env.\n\n## Full configuration reference:\nAll of it.\n"
    assert [c.title for c in md(text)] == ["`environment_vars`", "Full configuration reference:"]


def test_empty_heading_with_children_gives_no_chunk_but_stays_in_the_trail():
    text = "# Guide\n## The mirror\n### It skipped a share\nLook at the log.\n## Empty leaf\n"
    chunks = md(text)
    assert [heading_path(c) for c in chunks] == [
        "Guide > The mirror > It skipped a share", "Guide > Empty leaf"]
    assert chunks[0].context == f"README.md{SEP}Guide{SEP}The mirror{SEP}It skipped a share"
    assert chunks[1].text == "Empty leaf" and chunks[1].start_line == 5


def test_headings_in_block_quotes_and_lists_are_not_sections():
    text = "# Top\n> # quoted\n\n- # listed\n\nEnd.\n"
    (chunk,) = md(text)
    assert chunk.title == "Top" and "# quoted" in chunk.text and "# listed" in chunk.text


def test_empty_and_blank_documents_give_nothing():
    assert md("") == [] and md("\n\n  \n") == [] and md("---\ntitle: x\n---\n") == []


def test_document_without_headings_is_one_chunk():
    (chunk,) = md("Just some notes.\nMore notes.\n", "Notes_x.md", "doc")
    assert (chunk.section, chunk.title, chunk.text) == ("", "", "Just some notes.\nMore notes.")
    assert chunk.context == "Notes_x.md"


def test_long_section_is_split_with_context_repeated():
    body = "\n\n".join(f"Paragraph {i} " + "word " * 30 for i in range(12))
    text = f"# Reference\n## Options\n{body}\n"
    chunks = md(text, max_tokens=300)
    assert len(chunks) > 2
    assert all(len(c.embed_text) <= 300 for c in chunks)
    assert all(c.title == "Options" and c.section == "Reference" for c in chunks)
    assert all(c.context == f"README.md{SEP}Reference{SEP}Options" for c in chunks)
    assert [c.part for c in chunks] == list(range(1, len(chunks) + 1))
    assert chunks[0].start_line == 2  # the first part starts at its heading
    # Paragraphs are not cut: each part holds whole paragraphs.
    for c in chunks:
        assert all(p.startswith("Paragraph ") for p in c.text.split("\n\n"))
    assert "\n\n".join(c.text for c in chunks) == body


def test_harborlab_windows_readme_bom_and_crlf():
    chunks = md(read_fixture("Docs/README-Windows.md"), "Docs/README-Windows.md")
    assert chunks[0].title == "Windows machines and the documents share"
    assert [c.title for c in chunks[1:]] == [
        "Where the laptop backups land", "Why File History and not a harborlab job",
        "Restoring a laptop file", "Known quirk"]
    assert all("\r" not in c.text and "\ufeff" not in c.text for c in chunks)


def test_harborlab_network_readme_setext_title():
    chunks = md(read_fixture("Network/README-Network.md"), "Network/README-Network.md")
    assert chunks[0].title == "harborlab Network" and chunks[0].start_line == 1
    assert chunks[1].section == "harborlab Network"


def test_parts_of_a_long_yaml_block_name_their_key_path():
    yaml_lines = ["mqtt:", "  host: mqtt"] + ["birdseye:", "  layout:"] + [
        f"    # Optional: option {i} explained at some length" for i in range(30)] + [
        f"    option_{i}: {i}" for i in range(30)]
    text = "## Full configuration reference:\n\n```yaml\n" + "\n".join(yaml_lines) + "\n```\n"
    chunks = md(text, "reference.md", "doc", max_tokens=400)
    assert len(chunks) > 3
    base = f"reference.md{SEP}Full configuration reference:"
    assert chunks[0].context == base
    assert all(c.context == f"{base}{SEP}birdseye > layout" for c in chunks[1:])
    assert all(len(c.embed_text) <= 400 for c in chunks)


def test_mdx_import_lines_are_not_text():
    text = ('---\ntitle: Zones\n---\n\nimport TabItem from "@theme/TabItem";\n'
            "import X from '@site/x';\n\nZones are areas.\n\n```js\nimport a from 'b';\n```\n")
    (chunk,) = md(text, "docs/zones.md", "doc")
    assert chunk.text == "Zones are areas.\n\n```js\nimport a from 'b';\n```"
    assert chunk.start_line == 8


def test_bare_jsx_tag_lines_are_not_text_but_tags_with_words_are():
    text = ('## Multiple USB Corals\n\n<ConfigTabs>\n<TabItem value="ui">\n\nUse `usb:0` and `usb:1`.\n\n'
            "</TabItem>\n</ConfigTabs>\n\n<details>\n<summary>Available Models</summary>\n\nList.\n\n"
            "</details>\n\n```html\n<TabItem value=\"ui\">\n```\n")
    (chunk,) = md(text)
    assert chunk.text == ("Use `usb:0` and `usb:1`.\n\n<summary>Available Models</summary>\n\nList."
                          "\n\n```html\n<TabItem value=\"ui\">\n```")
