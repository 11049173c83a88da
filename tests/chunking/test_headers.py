"""The six-section header parser: where the header is, section lines, named paragraphs."""

from __future__ import annotations

import pytest

from varaverk.documents.chunks import SEP
from varaverk.documents.chunking import chunk_document
from varaverk.documents.script_headers import COMMENT_TITLE, SUMMARY_TITLE
from tests.chunking.support import by_title, read_fixture

BIG = 10_000  # a budget no header here reaches, so no test depends on splitting


def chunks_of(path: str, text: str, **kw):
    return chunk_document(path, "header", text, max_tokens=kw.pop("max_tokens", BIG), **kw)


def test_named_paragraph_needs_a_deeper_next_line():
    text = (
        "#!/bin/bash\n"
        "# OPERATIONAL SAFEGUARDS\n"
        "#   The job refuses to run twice and\n"         # wrapped prose: next line not deeper
        "#   checks the mount first.\n"
        "#   Mount Check\n"                              # a named paragraph: next line deeper
        "#     The share must be mounted; an unmounted\n"
        "#     share looks empty.\n"
        "#\n"
        "#     A second body paragraph.\n"
        "#   Lock\n"
        "#     One instance at a time.\n"
        "echo body\n"
    )
    chunks = chunks_of("job.sh", text)
    assert [(c.section, c.title) for c in chunks] == [
        ("OPERATIONAL SAFEGUARDS", ""),
        ("OPERATIONAL SAFEGUARDS", "Mount Check"),
        ("OPERATIONAL SAFEGUARDS", "Lock")]
    lead, mount, lock = chunks
    assert lead.text == "The job refuses to run twice and\nchecks the mount first."
    assert (lead.start_line, lead.end_line) == (3, 4)
    assert mount.text == ("Mount Check\nThe share must be mounted; an unmounted\nshare looks empty."
                          "\n\nA second body paragraph.")
    assert (mount.start_line, mount.end_line) == (5, 9)
    assert (lock.start_line, lock.end_line) == (10, 11)
    assert mount.context == f"job.sh{SEP}OPERATIONAL SAFEGUARDS{SEP}Mount Check"
    assert not any("echo" in c.text for c in chunks)  # the body is never indexed


def test_wrapped_prose_alone_makes_one_chunk():
    text = "#!/bin/sh\n# PURPOSE\n#   Line one of prose that wraps\n#   onto line two\n#   and three.\n"
    chunks = chunks_of("a.sh", text)
    assert [(c.title, c.text) for c in chunks] == [
        ("", "Line one of prose that wraps\nonto line two\nand three.")]


def test_configuration_variable_chunk_carries_name_and_default():
    text = ("#!/bin/sh\n# CONFIGURATION\n#   MOVER_STOP_TIMEOUT\n"
            "#     Seconds to wait for the mover to finish before killing it (default: 300)\n")
    (chunk,) = chunks_of("Tools/mover_stop.sh", text)
    assert chunk.title == "MOVER_STOP_TIMEOUT" and chunk.section == "CONFIGURATION"
    assert chunk.text == ("MOVER_STOP_TIMEOUT\nSeconds to wait for the mover to finish before "
                          "killing it (default: 300)")
    assert chunk.context == f"Tools/mover_stop.sh{SEP}CONFIGURATION{SEP}MOVER_STOP_TIMEOUT"
    assert chunk.citation == chunk.context


def test_section_line_rules():
    text = ("#!/bin/sh\n# Purpose\n#   not a section: lower case\n# PURPOSE: also text\n"
            "#   still the preamble\n## RUNTIME MODES:\n#   --now\n#     Run at once.\n")
    chunks = chunks_of("b.sh", text)
    assert [(c.section, c.title) for c in chunks] == [("", SUMMARY_TITLE), ("RUNTIME MODES", "--now")]
    assert chunks[0].text.startswith("Purpose\n")


def test_summary_is_prepended_to_purpose_lead():
    text = ("#!/usr/bin/env bash\n# tool :: x.sh\n# Does the thing nightly.\n#\n# PURPOSE\n"
            "#   Because the thing must be done.\n")
    (chunk,) = chunks_of("x.sh", text)
    assert chunk.section == "PURPOSE" and chunk.title == ""
    assert chunk.text == "tool :: x.sh\nDoes the thing nightly.\n\nBecause the thing must be done."
    assert (chunk.start_line, chunk.end_line) == (2, 6)


def test_summary_becomes_purpose_lead_when_purpose_opens_with_a_paragraph():
    text = ("#!/bin/sh\n# Does the thing.\n# PURPOSE\n#   Reason One\n#     Body one.\n")
    chunks = chunks_of("y.sh", text)
    assert [(c.section, c.title, c.text) for c in chunks] == [
        ("PURPOSE", "", "Does the thing."), ("PURPOSE", "Reason One", "Reason One\nBody one.")]


def test_python_docstring_header():
    text = ('#!/usr/bin/env python3\n"""tool :: job.py\n\nProve the backups restore.\n\n'
            "PURPOSE\n  Restores are the only proof.\n\nCONFIGURATION\n  JOB_SAMPLE\n"
            '    Files per run (default: 25)\n"""\nimport os\n# PURPOSE\n')
    chunks = chunks_of("job.py", text)
    assert [(c.section, c.title, c.text) for c in chunks] == [
        ("PURPOSE", "", "tool :: job.py\n\nProve the backups restore.\n\nRestores are the only proof."),
        ("CONFIGURATION", "JOB_SAMPLE", "JOB_SAMPLE\nFiles per run (default: 25)")]
    assert (chunks[1].start_line, chunks[1].end_line) == (10, 11)


def test_python_hash_block_header():
    text = "#!/usr/bin/env python3\n# PURPOSE\n#   Drive the fans.\n\nimport os\n"
    assert [(c.section, c.text) for c in chunks_of("fan.py", text)] == [("PURPOSE", "Drive the fans.")]


def test_php_block_header():
    text = ("<?php\n/*\n * tool :: Panel.php\n * Show the tile.\n *\n * PURPOSE\n *   The tile shows"
            " state.\n *\n * RUNTIME MODES\n *   format=json\n *     Returns JSON.\n */\n\n"
            "echo 'x'; /* PURPOSE */\n")
    chunks = chunks_of("Plugin/Panel.php", text)
    assert [(c.section, c.title, c.text) for c in chunks] == [
        ("PURPOSE", "", "tool :: Panel.php\nShow the tile.\n\nThe tile shows state."),
        ("RUNTIME MODES", "format=json", "format=json\nReturns JSON.")]
    assert (chunks[1].start_line, chunks[1].end_line) == (10, 11)


def test_php_docblock_opening_and_closing_on_text_lines():
    text = "<?php\n/** PURPOSE\n *   Inline opener.\n *   Closes here. */\n"
    assert [(c.section, c.text) for c in chunks_of("a.php", text)] == [
        ("PURPOSE", "Inline opener.\nCloses here.")]


def test_header_without_sections_is_one_comment_chunk():
    text = ("#!/bin/sh\n# backup.sh - copy the photos share\n#\n# Usage: backup.sh [-n] DEST\n"
            "#   -n   dry run\n# Environment: BACKUP_BWLIMIT (KiB/s, default 0)\n\nrsync -a\n")
    (chunk,) = chunks_of("backup.sh", text)
    assert (chunk.section, chunk.title) == ("", COMMENT_TITLE)
    assert "Usage: backup.sh [-n] DEST" in chunk.text and "BACKUP_BWLIMIT" in chunk.text
    assert "rsync" not in chunk.text
    assert (chunk.start_line, chunk.end_line) == (2, 6)


@pytest.mark.parametrize("text", [
    "",
    "#!/bin/sh\n",
    "#!/bin/sh\necho hi\n",
    "echo first\n# PURPOSE\n#   Too late: not the first comment block.\n",
    "#!/bin/sh\n# shellcheck shell=sh\n# -*- coding: utf-8 -*-\necho hi\n",
], ids=["empty", "shebang-only", "no-comment", "late-block", "annotations-only"])
def test_missing_header_gives_nothing(text):
    assert chunks_of("s.sh" if "python" not in text else "s.py", text) == []


@pytest.mark.parametrize("path, text, expected, lines", [
    ("s.sh", "#!/bin/sh\n# Backup photos to the NAS\nrsync -a /p nas:/p\n",
     "Backup photos to the NAS", (2, 2)),
    ("s.sh", "#!/bin/sh\n# one line\n#\n# two lines\necho hi\n", "one line\n\ntwo lines",
     (2, 4)),
    ("s.py", '#!/usr/bin/env python3\n"""Short docstring."""\nimport os\n', "Short docstring.",
     (2, 2)),
], ids=["one-line", "two-lines", "short-docstring"])
def test_a_leading_comment_of_any_length_is_the_header(path, text, expected, lines):
    (chunk,) = chunks_of(path, text)
    assert (chunk.title, chunk.text, (chunk.start_line, chunk.end_line)) == (
        COMMENT_TITLE, expected, lines)
    assert "rsync" not in chunk.text and "import" not in chunk.text


def test_title_must_be_a_short_label():
    # A banner line above indented text is prose, not a named paragraph (B18's shape).
    text = "#!/bin/sh\n# PURPOSE\n# " + "=" * 200 + "\n#   Deploys the app.\n"
    chunks = chunks_of("d.sh", text)
    assert [(c.section, c.title) for c in chunks] == [("PURPOSE", "")]


def test_harborlab_rsync_mirror_named_paragraphs():
    chunks = chunks_of("Backup/rsync_mirror.sh", read_fixture("Backup/rsync_mirror.sh"))
    safeguards = [c.title for c in chunks if c.section == "OPERATIONAL SAFEGUARDS"]
    assert safeguards == [
        "Single Instance Lock", "Source Mount Verification", "Minimum File Count Floor",
        "Delete Ratio Ceiling", "Merge-Run Delete Interlock", "Mover Coordination",
        "Destination Free Space Check", "Partial Transfer Directory",
        "Vanished File Tolerance", "Checksum Sampling"]
    (interlock,) = by_title(chunks, "OPERATIONAL SAFEGUARDS", "Merge-Run Delete Interlock")
    assert (interlock.start_line, interlock.end_line) == (61, 67)
    assert interlock.text.startswith("Merge-Run Delete Interlock\nIn merge mode the delete pass")
    assert interlock.text.endswith("--force-delete does not lift this interlock.")
    (mover,) = by_title(chunks, "OPERATIONAL SAFEGUARDS", "Mover Coordination")
    assert (mover.start_line, mover.end_line) == (68, 71)
    assert "Tools/mover_stop.sh" in mover.text
    (purpose,) = [c for c in chunks if c.section == "PURPOSE"]
    assert purpose.text.startswith("harborlab :: Backup/rsync_mirror.sh\n"
                                   "Mirror the irreplaceable shares from harbor01 to harbor02.")
    assert (purpose.start_line, purpose.end_line) == (2, 15)
    (pct,) = by_title(chunks, "CONFIGURATION", "MIRROR_MAX_DELETE_PCT")
    assert pct.text == ("MIRROR_MAX_DELETE_PCT\nLargest share of destination files a single run "
                        "may delete, in percent\n(default: 5)")
    assert [c.title for c in chunks if c.section == "RUNTIME MODES"] == [
        "--merge", "--dry-run", "--force-delete", "--share NAME", "--status", "--verbose"]
    assert all("set -euo pipefail" not in c.text for c in chunks)
    assert max(c.end_line for c in chunks) == 129  # the header ends before the body


@pytest.mark.parametrize("path,section,title,start,end", [
    ("Backup/backup_verify.py", "DESIGN PRINCIPLES", "Compare Against Live Data", 29, 31),
    ("Plugin/include/AskDocs.php", "RUNTIME MODES", "mode=status", 70, 72),
    ("Plugin/include/ConfigReader.php", "CONFIGURATION", "CFGREAD_MASK_WORDS", None, None),
    ("Maintenance/fan_control.py", "CONFIGURATION", "FANCTL_HIGH_TEMP", None, None),
])
def test_harborlab_headers_of_each_language(path, section, title, start, end):
    chunks = chunks_of(path, read_fixture(path))
    (chunk,) = by_title(chunks, section, title)
    assert chunk.text.startswith(title + "\n")
    if start:
        assert (chunk.start_line, chunk.end_line) == (start, end)
    lines = read_fixture(path).split("\n")
    assert title in lines[chunk.start_line - 1]


def test_wrapped_list_items_and_sentences_are_not_titles():
    text = ("#!/bin/sh\n# OPERATIONAL MODEL\n#   The job runs three steps:\n"
            "#   - take the lock, then wake the\n#     standby host\n"
            "#   1. count files on each\n#      share\n"
            "#   Then it copies, like this.\n#     rsync -a src dst\n"
            "#   --force-delete\n#     Lifts the ceiling.\n")
    chunks = chunks_of("l.sh", text)
    assert [(c.section, c.title) for c in chunks] == [
        ("OPERATIONAL MODEL", ""), ("OPERATIONAL MODEL", "--force-delete")]
    assert chunks[0].text.startswith("The job runs three steps:\n- take the lock, then wake the\n"
                                     "  standby host\n")
