"""Failure cases from ../shared/cases.md in the chunker's area, with their exact right values."""

from __future__ import annotations

import pytest

from varaverk.documents.chunks import KINDS, heading_path
from varaverk.documents.chunking import CHUNKERS, chunk_document
from tests.chunking.support import squeeze


def test_every_kind_has_its_chunker():
    assert tuple(CHUNKERS) == KINDS
    with pytest.raises(ValueError, match="unknown document kind 'wiki'"):
        chunk_document("a.md", "wiki", "# A\ntext\n")


# B10: a UTF-8 BOM must not hide the front matter and the first heading.
B10 = b"\xef\xbb\xbf---\ntitle: Tool\n---\n# Install\nRun make.\n"


@pytest.mark.parametrize("text", [B10.decode("utf-8"), B10.decode("utf-8-sig")],
                         ids=["bom-kept-by-caller", "bom-stripped-by-caller"])
def test_b10_bom_front_matter_is_metadata_and_one_section(text):
    chunks = chunk_document("README.md", "doc", text)
    assert [(c.section, c.title, c.text) for c in chunks] == [("", "Install", "Run make.")]
    assert chunks[0].meta == {"title": "Tool"}
    assert chunks[0].start_line == 4 and chunks[0].end_line == 5
    for c in chunks:
        assert "\ufeff" not in c.text + c.title + c.section + c.context
        assert "title: Tool" not in c.title and "title: Tool" not in c.text


# B11: CRLF (and lone CR) line ends must not stop headings and section names matching.
B11_MANUAL = b"# Manual\r\n\r\nIntro text.\r\n\r\n## Backup\r\nRun backup.sh nightly.\r\n"
B11_SCRIPT = (b"#!/bin/sh\r\n# PURPOSE:\r\n#   Nightly backup.\r\n# CONFIGURATION:\r\n"
              b"#   BACKUP_DIR=/srv/bak\r\n")


@pytest.mark.parametrize("newline", [b"\r\n", b"\r"], ids=["crlf", "cr"])
def test_b11_crlf_markdown(newline):
    text = B11_MANUAL.replace(b"\r\n", newline).decode()
    chunks = chunk_document("Manual.md", "doc", text)
    assert [(c.title, c.text) for c in chunks] == [
        ("Manual", "Intro text."), ("Backup", "Run backup.sh nightly.")]
    assert [heading_path(c) for c in chunks] == ["Manual", "Manual > Backup"]
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 3), (5, 6)]
    for c in chunks:
        assert "\r" not in c.text + c.title + c.section + c.context + repr(c.meta)


@pytest.mark.parametrize("newline", [b"\r\n", b"\r"], ids=["crlf", "cr"])
def test_b11_crlf_script_header(newline):
    text = B11_SCRIPT.replace(b"\r\n", newline).decode()
    chunks = chunk_document("tools/backup.sh", "header", text)
    assert [(c.section, c.title, c.text) for c in chunks] == [
        ("PURPOSE", "", "Nightly backup."), ("CONFIGURATION", "", "BACKUP_DIR=/srv/bak")]
    assert [(c.start_line, c.end_line) for c in chunks] == [(3, 3), (5, 5)]
    for c in chunks:
        assert "\r" not in c.text + c.title + c.section + c.context


# B13: '#' comments inside fenced or indented code are not headings.
B13_BACKTICK = ("# Deploy Guide\n## Steps\n```bash\n# stop the service first\nsystemctl stop app\n"
                "```\n## Rollback\nRestore the snapshot.\n")
B13_TILDE = B13_BACKTICK.replace("```bash", "~~~bash").replace("```", "~~~")


@pytest.mark.parametrize("text,code", [
    (B13_BACKTICK, "```bash\n# stop the service first\nsystemctl stop app\n```"),
    (B13_TILDE, "~~~bash\n# stop the service first\nsystemctl stop app\n~~~"),
], ids=["backticks", "tildes"])
def test_b13_fenced_comment_is_not_a_heading(text, code):
    chunks = chunk_document("README.md", "readme", text)
    assert [heading_path(c) for c in chunks] == [
        "Deploy Guide > Steps", "Deploy Guide > Rollback"]  # the H1 has no body of its own
    steps, rollback = chunks
    assert steps.text == code and "# stop the service first" in steps.text
    assert rollback.text == "Restore the snapshot."
    assert not any("stop the service first" in c.title + c.section for c in chunks)
    assert steps.context == "README.md \u203a Deploy Guide \u203a Steps"


def test_b13_heading_paths_include_the_top_heading_when_it_has_text():
    text = B13_BACKTICK.replace("## Steps", "Read this first.\n\n## Steps")
    chunks = chunk_document("README.md", "readme", text)
    assert [heading_path(c) for c in chunks] == [
        "Deploy Guide", "Deploy Guide > Steps", "Deploy Guide > Rollback"]
    assert chunks[0].text == "Read this first."


def test_b13_indented_code_is_not_a_heading():
    text = ("# Deploy Guide\n## Steps\nRun these:\n\n    # not a heading\n    systemctl stop app\n\n"
            "## Rollback\nRestore the snapshot.\n")
    chunks = chunk_document("README.md", "readme", text)
    assert [heading_path(c) for c in chunks] == [
        "Deploy Guide > Steps", "Deploy Guide > Rollback"]
    assert "    # not a heading" in chunks[0].text
    assert not any("not a heading" in c.title for c in chunks)


def test_b13_script_header_parser_ignores_markdown_rules():
    # A '## ' line in a header is comment text, not a Markdown heading.
    text = "#!/bin/sh\n# PURPOSE\n#   Run it.\n#   ## not a section\n"
    chunks = chunk_document("x.sh", "header", text)
    assert [(c.section, c.title, c.text) for c in chunks] == [
        ("PURPOSE", "", "Run it.\n## not a section")]


# B18: a single line longer than the embedder's context is split, never truncated.
B18 = (b"#!/bin/sh\n# PURPOSE:\n# " + b"=" * 12000 + b"\n#   Deploys the app.\n").decode()


@pytest.mark.parametrize("counter", ["chars", "tokenizer"])
def test_b18_huge_line_is_hard_split_within_budget(counter, real_count_tokens):
    count = len if counter == "chars" else real_count_tokens
    chunks = chunk_document("scripts/deploy.sh", "header", B18, max_tokens=256,
                            count_tokens=None if counter == "chars" else count)
    assert len(chunks) > 1
    assert all(count(c.embed_text) <= 256 for c in chunks)
    assert all(c.section == "PURPOSE" for c in chunks)
    assert [c.part for c in chunks] == list(range(1, len(chunks) + 1))
    assert all(c.context == "scripts/deploy.sh \u203a PURPOSE" for c in chunks)
    assert any("Deploys the app." in c.text for c in chunks)
    # Nothing is lost: every '=' and every word is in some part.
    assert squeeze("".join(c.text for c in chunks)) == "=" * 12000 + "Deploysthe app.".replace(
        " ", "")
    assert all(c.start_line == 3 for c in chunks[:-1])
    assert chunks[-1].end_line == 4
