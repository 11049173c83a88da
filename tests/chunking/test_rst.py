"""reStructuredText chunking: section titles by docutils' adornment rules, text verbatim."""

from __future__ import annotations

from varaverk.documents.chunking import chunk_document

PAGE = """\
=================================
Harbor |build| |docs|
=================================

Introduction
============

Harbor runs the lab's containers.

Getting started
---------------

Install it with::

    Not a title
    ===========

----------

After the transition above, still the same section.

Backups
=======

Nightly at 02:00.

Too short
=====

Short underlines are text.
"""


def _chunks(text: str, path: str = "README.rst"):
    return chunk_document(path, "doc", text, max_tokens=512, count_tokens=len)


def test_titles_with_overline_and_underline_nest_by_first_seen_style():
    trails = [(c.section, c.title, c.start_line) for c in _chunks(PAGE)]
    assert trails == [
        ("Harbor", "Introduction", 5),
        ("Harbor > Introduction", "Getting started", 10),
        ("Harbor", "Backups", 22),
    ]
    assert _chunks(PAGE)[0].context == "README.rst › Harbor › Introduction"


def test_literal_blocks_transitions_and_short_underlines_stay_body_text():
    by_title = {c.title: c.text for c in _chunks(PAGE)}
    started = by_title["Getting started"]
    assert "    Not a title\n    ===========" in started  # verbatim, rules and all
    assert "----------\n\nAfter the transition above" in started
    assert "Too short\n=====\n\nShort underlines are text." in by_title["Backups"]


def test_only_rst_files_take_the_rst_chunker():
    markdown = _chunks(PAGE, path="README.md")  # CommonMark knows no overline titles
    assert [c.title for c in markdown][:2] != ["Introduction", "Getting started"]
    assert [c.title for c in _chunks(PAGE, path="docs/Setup.RST")][:2] == \
        ["Introduction", "Getting started"]


def test_text_before_the_first_title_is_its_own_chunk():
    (lead, body) = _chunks(".. image:: logo.png\n\nHarbor\n======\n\nThe lab.\n")
    assert (lead.title, lead.text) == ("", ".. image:: logo.png")
    assert (body.title, body.text, body.start_line) == ("Harbor", "The lab.", 3)
