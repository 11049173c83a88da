"""A change to what is masked re-chunks every document: the chunker stamp reads the masking
rules' source (and the chunkers'), wherever the package keeps them."""

from __future__ import annotations

import binascii
from pathlib import Path

from varaverk.index import indexer


def test_the_stamp_reads_the_masking_rules_and_the_chunkers(monkeypatch):
    names_only = 0
    for name in indexer.CHUNKER_MODULES:
        names_only = binascii.crc32(name.encode(), names_only)
    before = indexer.chunker_stamp()
    assert before != f"{names_only:08x}"  # computed from the sources, not from missing files

    real = Path.read_bytes

    def edited(path: Path) -> bytes:
        data = real(path)
        return data + b"\n# a new rule\n" if path.name == "secret_patterns.py" else data

    monkeypatch.setattr(Path, "read_bytes", edited)
    assert indexer.chunker_stamp() != before
