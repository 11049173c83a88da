"""A change to what is masked re-chunks every document: the installed chunker stamp reads the
source of every masking module (and of the chunkers), wherever the packages keep them."""

from __future__ import annotations

from pathlib import Path

import pytest

from varaverk import masking
from varaverk.documents.stamp import chunker_stamp

MASKING_MODULES = sorted(p.name for p in Path(masking.__file__).parent.glob("*.py"))


def test_the_stamp_is_computed_from_the_sources_not_from_missing_files(monkeypatch):
    before = chunker_stamp()

    def unreadable(path: Path) -> bytes:
        raise OSError(path)

    monkeypatch.setattr(Path, "read_bytes", unreadable)
    assert chunker_stamp() != before


@pytest.mark.parametrize("module", MASKING_MODULES)
def test_an_edit_to_any_masking_module_changes_the_stamp(monkeypatch, module):
    before = chunker_stamp()
    real = Path.read_bytes

    def edited(path: Path) -> bytes:
        data = real(path)
        return data + b"\n# a new rule\n" if path.parent.name == "masking" \
            and path.name == module else data

    monkeypatch.setattr(Path, "read_bytes", edited)
    assert chunker_stamp() != before
