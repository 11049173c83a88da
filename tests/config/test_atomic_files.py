"""write_atomic: the old or the new file, never a mixture, and no temporary left behind."""

from __future__ import annotations

import os
import stat

import pytest

from varaverk.atomic_files import write_atomic


def test_replaces_content_with_the_given_mode(tmp_path):
    target = tmp_path / "chat.json"
    target.write_bytes(b"old")
    write_atomic(target, b"new", mode=0o640)
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert os.listdir(tmp_path) == ["chat.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "ledger.db"
    target.write_bytes(b"old rows\n")


    with pytest.raises(TypeError):
        write_atomic(target, object())  # type: ignore[arg-type]  (write raises mid-way)
    assert target.read_bytes() == b"old rows\n"
    assert os.listdir(tmp_path) == ["ledger.db"]


def test_a_missing_folder_is_an_error_not_a_silent_success(tmp_path):
    with pytest.raises(FileNotFoundError):
        write_atomic(tmp_path / "nope" / "f", b"x")


def test_a_write_that_need_not_be_durable_is_still_atomic_and_syncs_nothing(tmp_path,
                                                                           monkeypatch):
    target = tmp_path / "run.progress.json"
    target.write_bytes(b'{"phase": "reading"}')
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", synced.append)
    write_atomic(target, b'{"phase": "embedding"}', durable=False)
    assert target.read_bytes() == b'{"phase": "embedding"}'
    assert os.listdir(tmp_path) == ["run.progress.json"] and synced == []
    write_atomic(target, b"{}")
    assert len(synced) == 2  # durable (the default): the file and its folder
