"""The re-chunk stamp covers the whole documents package and the whole masking package."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from varaverk import masking
from varaverk.documents import chunking, stamp

DOCUMENTS = Path(chunking.__file__).parent
MASKING = Path(masking.__file__).parent
MASKING_MODULES = sorted(p.name for p in MASKING.glob("*.py"))


def _copies(tmp_path: Path) -> tuple[Path, Path]:
    """Copies of both stamped packages under their own names."""
    ignore = shutil.ignore_patterns("__pycache__")
    documents = shutil.copytree(DOCUMENTS, tmp_path / "documents", ignore=ignore)
    rules = shutil.copytree(MASKING, tmp_path / "masking", ignore=ignore)
    return Path(documents), Path(rules)


def test_the_stamp_is_eight_hex_digits_and_steady():
    first = stamp.chunker_stamp()
    assert len(first) == 8 and int(first, 16) >= 0
    assert stamp.chunker_stamp() == first


def test_the_stamp_reads_the_documents_and_the_masking_packages():
    assert [p.resolve() for p in stamp.STAMPED_PACKAGES] == [DOCUMENTS.resolve(),
                                                            MASKING.resolve()]
    assert stamp.chunker_stamp() == stamp.code_stamp(DOCUMENTS, MASKING)
    assert {"shapes.py", "values.py", "layout.py", "blocks.py", "documents.py",
            "scrubbing.py"} <= set(MASKING_MODULES)


def test_adding_a_module_to_the_documents_package_changes_the_stamp(tmp_path):
    copy, _ = _copies(tmp_path)
    before = stamp.code_stamp(copy)
    assert before == stamp.code_stamp(DOCUMENTS)
    (copy / "wiki_pages.py").write_text("")  # a new chunker, even an empty one
    added = stamp.code_stamp(copy)
    assert added != before
    (copy / "wiki_pages.py").rename(copy / "wiki_sections.py")
    assert stamp.code_stamp(copy) not in (before, added)


def test_adding_or_moving_a_masking_module_changes_the_stamp(tmp_path):
    documents, rules = _copies(tmp_path)
    before = stamp.code_stamp(documents, rules)
    assert before == stamp.chunker_stamp()
    (rules / "vendor_shapes.py").write_text("")  # a new masking module, even an empty one
    added = stamp.code_stamp(documents, rules)
    assert added != before
    (rules / "vendor_shapes.py").rename(documents / "vendor_shapes.py")  # moved, same bytes
    assert stamp.code_stamp(documents, rules) not in (before, added)


@pytest.mark.parametrize("module", MASKING_MODULES)
def test_a_change_to_a_chunker_or_to_any_masking_module_changes_the_stamp(tmp_path, module):
    documents, rules = _copies(tmp_path)
    before = stamp.code_stamp(documents, rules)
    with (documents / "markdown_sections.py").open("a") as fh:
        fh.write("\n# a new rule\n")
    edited = stamp.code_stamp(documents, rules)
    assert edited != before
    with (rules / module).open("a") as fh:
        fh.write("\n# a new pattern\n")
    assert stamp.code_stamp(documents, rules) not in (before, edited)
