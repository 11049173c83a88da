"""The re-chunk stamp covers the whole documents package and the masking rules."""

from __future__ import annotations

import shutil
from pathlib import Path

from varaverk import secret_patterns
from varaverk.documents import chunking, stamp

DOCUMENTS = Path(chunking.__file__).parent


def test_the_stamp_is_eight_hex_digits_and_steady():
    first = stamp.chunker_stamp()
    assert len(first) == 8 and int(first, 16) >= 0
    assert stamp.chunker_stamp() == first


def test_adding_a_module_to_the_documents_package_changes_the_stamp(tmp_path):
    copy = tmp_path / "documents"
    shutil.copytree(DOCUMENTS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = stamp.code_stamp(copy)
    assert before == stamp.code_stamp(DOCUMENTS)
    (copy / "wiki_pages.py").write_text("")  # a new chunker, even an empty one
    added = stamp.code_stamp(copy)
    assert added != before
    (copy / "wiki_pages.py").rename(copy / "wiki_sections.py")
    assert stamp.code_stamp(copy) not in (before, added)


def test_a_change_to_a_chunker_or_to_the_masking_rules_changes_the_stamp(tmp_path):
    copy = tmp_path / "documents"
    shutil.copytree(DOCUMENTS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    rules = tmp_path / "secret_patterns.py"
    shutil.copy(secret_patterns.__file__, rules)
    before = stamp.code_stamp(copy, [rules])
    with (copy / "markdown_sections.py").open("a") as fh:
        fh.write("\n# a new rule\n")
    edited = stamp.code_stamp(copy, [rules])
    assert edited != before
    with rules.open("a") as fh:
        fh.write("\n# a new pattern\n")
    assert stamp.code_stamp(copy, [rules]) != edited
    assert stamp._MASKING_RULES.samefile(secret_patterns.__file__)  # the one chunker_stamp reads
