"""The no-op shortcut (varaverk.index.fingerprint): a full run that finds nothing to do records
the repository's fingerprint; the next ``ai-index`` whose fingerprint is the same says so with
the same line, and any change a full run would act on sends it down the full path. Real git
repositories, real SQLite, the fake model server, the command as a subprocess."""

from __future__ import annotations

import os
import re
import time

import pytest

from tests.index.conftest import make_settings, run_index
from tests.support.repos import git, make_repo
from varaverk.index import fingerprint
from varaverk.index.refresh import refresh

OLD = "# Lab\n\nThe backup runs at 02:00 nightly.\n"
FILES = {"README.md": OLD, "docs/README-Backup.md": "# Backup\n\nRestore with restore.sh.\n"}
TIME = re.compile(r" in \d+\.\d\d s$")


@pytest.fixture
def lab(tmp_path, model_server):
    """A repository indexed once, then checked by a full run that found nothing to do (which
    recorded the fingerprint)."""
    repo = make_repo(tmp_path / "lab", FILES)
    settings = make_settings(repo, tmp_path, model_server)
    assert refresh(settings, progress=False).wrote
    assert not refresh(settings, progress=False).wrote
    assert fingerprint.fingerprint_path(settings.index_path).is_file()
    return repo, settings


def _quick(settings) -> str | None:
    return fingerprint.unchanged_summary(settings)


def test_the_shortcut_says_what_the_full_run_said_in_the_same_words(lab):
    repo, settings = lab
    log = settings.ai_log_dir / "ai-index.log"
    log.unlink(missing_ok=True)
    fingerprint.fingerprint_path(settings.index_path).unlink()
    full = run_index(settings)  # records the fingerprint again
    quick = run_index(settings)
    assert full.returncode == quick.returncode == 0, (full.stderr, quick.stderr)
    assert full.stderr.startswith("ai-index: index up to date: 2 tracked files")
    assert TIME.sub("", full.stderr.strip()) == TIME.sub("", quick.stderr.strip())
    lines = log.read_text().splitlines()
    assert len(lines) == 2
    pattern = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ai-index\[\d+\] INFO varaverk\.ai_index: "
    assert all(re.match(pattern, line) for line in lines), lines
    assert TIME.sub("", lines[0].split(": ", 1)[1]) == TIME.sub("", lines[1].split(": ", 1)[1])
    assert run_index(settings, "-q").stderr == ""


def test_an_edit_with_its_mtime_put_back_is_not_taken_for_nothing(lab, tmp_path):
    """Same size, the mtime of the indexed copy (touch -r): only ctime tells."""
    repo, settings = lab
    assert _quick(settings) is not None
    path = repo / "README.md"
    before = path.stat()
    path.write_text(OLD.replace("02:00", "03:00"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert _quick(settings) is None
    out = run_index(settings)
    assert out.returncode == 0 and "index refreshed" in out.stderr and "1 indexed" in out.stderr


@pytest.mark.parametrize("change", ["new tracked file", "commit", "deleted file",
                                    "folder became a link"])
def test_a_change_of_the_repository_sends_the_run_down_the_full_path(lab, change):
    repo, settings = lab
    if change == "new tracked file":
        (repo / "NOTES.md").write_text("# Notes\n\nNew.\n")
        git(repo, "add", "NOTES.md")
    elif change == "commit":
        git(repo, "commit", "-q", "--allow-empty", "-m", "nothing but HEAD")
    elif change == "deleted file":
        (repo / "README.md").unlink()
    else:  # the same files, reached through a link the full path never follows
        (repo / "docs").rename(repo / "elsewhere")
        (repo / "docs").symlink_to("elsewhere")
    assert _quick(settings) is None
    assert run_index(settings).returncode == 0
    assert not refresh(settings, progress=False).wrote  # settled, and recorded again
    assert _quick(settings) is not None


def test_other_settings_or_another_index_write_need_the_full_path(lab):
    repo, settings = lab
    assert _quick(settings.replace(ai_globs_skip=("**/README-*.md",))) is None
    assert _quick(settings.replace(ai_sources=(f"notes=notes:{repo}",))) is None
    assert _quick(settings) is not None
    (repo / "README.md").write_text("# Lab\n\nChanged.\n")
    assert refresh(settings, progress=False).wrote  # a new generation
    os.utime(repo / "README.md", ns=(0, 0))  # even with every stat as recorded before
    assert _quick(settings) is None


def test_nothing_is_recorded_while_a_file_is_racy(lab):
    """A file changed after the full run began could change again within the same clock tick
    without its stat showing it: no fingerprint vouches for it."""
    repo, settings = lab
    listed = fingerprint.tracked_files.list_tracked(repo)
    started = time.time_ns()
    (repo / "README.md").write_text(OLD)  # same bytes, but written now
    assert not fingerprint.record(settings, listed, "1", started, "index up to date: ...")
    assert fingerprint.record(settings, listed, "1", time.time_ns() + 10**9, "index up to "
                              "date: ...")


def test_a_warning_about_the_settings_is_printed_as_the_full_path_prints_it(lab):
    """The shortcut reads the settings without logging: a run with something to warn about
    takes the full path, which says it in the command's words."""
    repo, settings = lab
    assert run_index(settings).returncode == 0  # the command's own settings recorded
    out = run_index(settings, env_extra={"AI_TOPK": "3"})
    assert out.returncode == 0
    assert out.stderr.startswith("ai-index: warning: AI_TOPK (in the environment) is not a "
                                 "Varaverk setting and is ignored; did you mean AI_TOP_K?")
    assert "index up to date" in out.stderr


@pytest.mark.parametrize("args, plain", [
    ([], (False, None)), (["-q"], (True, None)), (["--quiet", "--config", "a.conf"],
                                                  (True, "a.conf")),
    (["--config=a.conf"], (False, "a.conf")), (["-v"], None), (["--force"], None),
    (["--config"], None), (["--config", "-q"], None), (["--config="], None), (["-qv"], None),
    (["--status"], None), (["extra"], None)])
def test_only_a_plain_refresh_command_line_tries_the_shortcut(args, plain):
    from varaverk_tools.ai_index import _plain_refresh

    assert _plain_refresh(args) == plain
