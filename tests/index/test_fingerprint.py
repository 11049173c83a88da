"""The no-op shortcut (varaverk.index.fingerprint): a command's full run that finds nothing to do
records every input of that verdict; the next ``ai-index`` whose inputs all have the same value
says so with the same line, and any change a full run would act on sends it down the full path.
Real git repositories, real SQLite, the fake model server, the command as a subprocess; the
shortcut in-process under the command's environment (``_quick``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from tests.index.conftest import ENTRY, cli_env, make_settings, run_index
from tests.support.repos import git, make_repo
from varaverk import config_inputs
from varaverk.config import load_settings
from varaverk.documents.tracked_files import KindMatcher
from varaverk.index import fingerprint
from varaverk.index.refresh import _optimistic_pass, refresh
from varaverk.index.store.index import Index

OLD = "# Lab\n\nThe backup runs at 02:00 nightly.\n"
FILES = {"README.md": OLD, "docs/README-Backup.md": "# Backup\n\nRestore with restore.sh.\n"}
TIME = re.compile(r" in \d+\.\d\d s$")
UP_TO_DATE = "ai-index: index up to date: 2 tracked files"


@pytest.fixture
def lab(tmp_path, model_server):
    """A repository indexed once, then checked by a full ``ai-index`` that found nothing to do
    (which recorded its inputs)."""
    repo = make_repo(tmp_path / "lab", FILES)
    settings = make_settings(repo, tmp_path, model_server)
    assert refresh(settings, progress=False).wrote
    out = run_index(settings)
    assert out.returncode == 0 and out.stderr.startswith(UP_TO_DATE), out.stderr
    return repo, settings


@pytest.fixture
def quick(monkeypatch):
    """``quick(settings, *args, **env)``: the shortcut's answer (the log line's head, or None)
    for ``ai-index ARGS`` in the environment ``run_index`` gives the command, plus ``env`` (a
    None value unsets)."""
    def answer(settings, *args: str, **env: str | None) -> str | None:
        with monkeypatch.context() as m:
            for key in [k for k in os.environ if k.startswith("AI_")]:
                m.delenv(key)
            for key, value in _env(settings, **env).items():
                m.setenv(key, value)
            config = args[1] if args[:1] == ("--config",) else None
            found = fingerprint.unchanged_summary(config)
        return None if found is None else found[0]
    return answer


def _env(settings, **env: str | None) -> dict[str, str]:
    """``cli_env(settings)`` with ``env`` set (a None value unsets)."""
    out = cli_env(settings, **{k: v for k, v in env.items() if v is not None})
    return {k: v for k, v in out.items() if env.get(k, "") is not None}


def test_the_shortcut_says_what_the_full_run_said_in_the_same_words(lab, quick):
    repo, settings = lab
    log = settings.ai_log_dir / "ai-index.log"
    log.unlink(missing_ok=True)
    assert quick(settings) is not None
    for name in os.listdir(settings.ai_data_dir / fingerprint.FOLDER):
        os.unlink(settings.ai_data_dir / fingerprint.FOLDER / name)
    full = run_index(settings)  # records again
    assert quick(settings) is not None
    quick_run = run_index(settings)
    assert full.returncode == quick_run.returncode == 0, (full.stderr, quick_run.stderr)
    assert full.stderr.startswith(UP_TO_DATE)
    assert TIME.sub("", full.stderr.strip()) == TIME.sub("", quick_run.stderr.strip())
    lines = log.read_text().splitlines()
    assert len(lines) == 2
    pattern = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ai-index\[\d+\] INFO varaverk\.ai_index: "
    assert all(re.match(pattern, line) for line in lines), lines
    assert TIME.sub("", lines[0].split(": ", 1)[1]) == TIME.sub("", lines[1].split(": ", 1)[1])
    assert run_index(settings, "-q").stderr == ""


def test_an_edit_with_its_mtime_put_back_is_not_taken_for_nothing(lab, quick):
    """Same size, the mtime of the indexed copy (touch -r): only ctime tells."""
    repo, settings = lab
    assert quick(settings) is not None
    path = repo / "README.md"
    before = path.stat()
    path.write_text(OLD.replace("02:00", "03:00"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert quick(settings) is None
    out = run_index(settings)
    assert out.returncode == 0 and "index refreshed" in out.stderr and "1 indexed" in out.stderr


@pytest.mark.parametrize("change", ["new tracked file", "commit", "deleted file",
                                    "untracked, still on disk", "folder became a link"])
def test_a_change_of_the_repository_sends_the_run_down_the_full_path(lab, quick, change):
    repo, settings = lab
    if change == "new tracked file":
        (repo / "NOTES.md").write_text("# Notes\n\nNew.\n")
        git(repo, "add", "NOTES.md")
    elif change == "commit":
        git(repo, "commit", "-q", "--allow-empty", "-m", "nothing but HEAD")
    elif change == "deleted file":
        (repo / "README.md").unlink()
    elif change == "untracked, still on disk":  # only git's index file changes
        git(repo, "rm", "-q", "--cached", "docs/README-Backup.md")
    else:  # the same files, reached through a link the full path never follows
        (repo / "docs").rename(repo / "elsewhere")
        (repo / "docs").symlink_to("elsewhere")
    assert quick(settings) is None
    assert run_index(settings).returncode == 0
    time.sleep(0.05)  # past the racy window of what that run wrote
    assert run_index(settings).stderr.startswith("ai-index: index up to date")  # recorded
    assert quick(settings) is not None


def test_other_settings_or_another_index_write_need_the_full_path(lab, quick):
    repo, settings = lab
    assert quick(settings) is not None
    assert quick(settings, AI_GLOBS_SKIP="**/README-*.md") is None
    assert quick(settings, AI_SOURCES=f"notes=notes:{repo}") is None
    assert quick(settings, AI_ENABLED="false") is None
    assert quick(settings, AI_TOP_K="7") is None  # any setting, even one a refresh never reads
    assert quick(settings, XDG_DATA_HOME="/elsewhere") is None  # a default's source
    assert quick(settings) is not None
    (repo / "README.md").write_text("# Lab\n\nChanged.\n")
    assert refresh(settings, progress=False).wrote  # a new generation
    os.utime(repo / "README.md", ns=(0, 0))  # even with every stat as recorded before
    assert quick(settings) is None


def test_a_disabled_run_says_so_and_never_takes_the_shortcut(lab, quick):
    repo, settings = lab
    out = run_index(settings, env_extra={"AI_ENABLED": "false"})
    assert out.returncode == 0 and "AI_ENABLED is false" in out.stderr


def test_a_repository_link_moved_to_another_repository_is_another_index(lab, quick, tmp_path):
    """AI_REPO_ROOT through a symbolic link: the settings hold the resolved path, so a link
    pointed elsewhere changes them although no input's text did."""
    repo, settings = lab
    other = make_repo(tmp_path / "other", {"README.md": "# Other\n\nSomething else.\n"})
    link = tmp_path / "current"
    link.symlink_to(repo)
    linked = settings.replace(ai_repo_root=link)
    assert run_index(linked).stderr.startswith(UP_TO_DATE)
    assert quick(linked) is not None
    link.unlink()
    link.symlink_to(other)
    assert quick(linked) is None
    out = run_index(linked)
    assert out.returncode == 0 and "index refreshed: 1 tracked files" in out.stderr, out.stderr


@pytest.mark.parametrize("change", ["edited", "edited, mtime put back", "touched", "replaced",
                                    "removed"])
def test_a_changed_conf_file_needs_the_full_path(lab, quick, tmp_path, change):
    repo, settings = lab
    conf = tmp_path / "master.conf"
    conf.write_text("AI_TOP_K=5\nAI_GEN_MODEL=qwen2.5:3b\n")
    past = time.time_ns() - 10**9
    os.utime(conf, ns=(past, past))
    assert run_index(settings, "--config", str(conf)).stderr.startswith(UP_TO_DATE)
    assert quick(settings, "--config", str(conf)) is not None
    assert len(os.listdir(settings.ai_data_dir / fingerprint.FOLDER)) == 2  # one per conf
    assert quick(settings) is not None  # the run without --config keeps its own
    before = conf.stat()
    if change.startswith("edited"):
        conf.write_text("AI_TOP_K=6\nAI_GEN_MODEL=qwen2.5:3b\n")
        if change.endswith("put back"):
            os.utime(conf, ns=(before.st_atime_ns, before.st_mtime_ns))
    elif change == "touched":
        os.utime(conf)
    elif change == "replaced":  # the same bytes and times, another file (a restore, mv)
        (tmp_path / "new.conf").write_bytes(conf.read_bytes())
        os.utime(tmp_path / "new.conf", ns=(before.st_atime_ns, before.st_mtime_ns))
        os.replace(tmp_path / "new.conf", conf)
    else:
        conf.unlink()
    assert quick(settings, "--config", str(conf)) is None


def test_a_conf_file_appearing_at_the_default_place_needs_the_full_path(lab, quick, tmp_path):
    """With no conf file, its absence is an input: the record holds the default place's stat
    error, which a file created there no longer gives."""
    repo, settings = lab
    default = config_inputs.conf_path(None, config_inputs.tool_root())
    assert not os.path.exists(default)
    (name,) = os.listdir(settings.ai_data_dir / fingerprint.FOLDER)
    fields = (settings.ai_data_dir / fingerprint.FOLDER / name).read_text().split("\0")
    assert "\0".join(["lstat", os.path.realpath(default), "error 2"]) in "\0".join(fields)
    inputs = config_inputs.Inputs()
    inputs.note_conf(str(tmp_path / "later.conf"))
    kind, path, value = inputs.noted[-1]
    assert (kind, value) == ("lstat", "error 2")
    (tmp_path / "later.conf").write_text("AI_TOP_K=6\n")
    assert config_inputs.present(kind, path) != value


def test_a_conf_naming_the_data_folder_is_found_without_reading_the_settings(quick, tmp_path,
                                                                               model_server):
    """AI_DATA_DIR in the conf file only, as a deployment writes it: the record is found there."""
    repo = make_repo(tmp_path / "lab", FILES)
    settings = make_settings(repo, tmp_path, model_server)
    assert refresh(settings, progress=False).wrote
    conf = tmp_path / "master.conf"
    conf.write_text(f'export AI_DATA_DIR="{settings.ai_data_dir}"\n')
    past = time.time_ns() - 10**9
    os.utime(conf, ns=(past, past))
    out = subprocess.run([sys.executable, str(ENTRY), "--config", str(conf)], capture_output=True,
                         text=True, cwd=repo, env=_env(settings, AI_DATA_DIR=None))
    assert out.returncode == 0 and out.stderr.startswith(UP_TO_DATE), out.stderr
    assert os.listdir(settings.ai_data_dir / fingerprint.FOLDER)
    assert quick(settings, "--config", str(conf), AI_DATA_DIR=None) is not None


@pytest.mark.parametrize("damage", [b"", b"garbage", b"varaverk-fingerprint 2\0\0x\0y",
                                    "varaverk-fingerprint 2\0\0{log}\0head\0nonsense\0a\0b"])
def test_a_foreign_or_damaged_record_costs_only_the_full_path(lab, quick, damage):
    repo, settings = lab
    (name,) = os.listdir(settings.ai_data_dir / fingerprint.FOLDER)
    place = settings.ai_data_dir / fingerprint.FOLDER / name
    if isinstance(damage, str):
        damage = damage.format(log=settings.ai_log_dir).encode()
    place.write_bytes(damage)
    out = run_index(settings)
    assert out.returncode == 0 and out.stderr.startswith(UP_TO_DATE), out.stderr
    assert quick(settings) is not None  # written again


def test_nothing_is_recorded_while_a_file_is_racy(lab, monkeypatch):
    """A file changed after the full run began could change again within the same clock tick
    without its stat showing it: no record vouches for it."""
    repo, settings = lab
    for key, value in cli_env(settings).items():
        monkeypatch.setenv(key, value)
    inputs = config_inputs.Inputs()
    loaded = load_settings(None, inputs=inputs)
    seen = _optimistic_pass(loaded, KindMatcher.from_settings(loaded))
    generation = seen.meta["generation"]
    started = time.time_ns()
    inputs.started_ns = started
    (repo / "README.md").write_text(OLD)  # same bytes, but written now
    assert not fingerprint.record(loaded, inputs, seen.listing, generation, started, "head")
    inputs.started_ns = started + 10**9
    assert fingerprint.record(loaded, inputs, seen.listing, generation, started + 10**9, "head")


def test_a_recently_written_index_is_checked_by_its_generation(lab):
    """The index file's stat vouches for its generation only once the write is past the racy
    window; until then the record holds the generation, read with SQLite."""
    repo, settings = lab
    index = str(settings.index_path)
    gen = "7"
    long_after = time.time_ns() + 10**9  # no write is at or after it: none is racy
    assert [kind for kind, _, _ in fingerprint._index_checks(index, gen, long_after)] == \
        ["lstat", "wal"]
    (check,) = fingerprint._index_checks(index, gen, 0)  # every write at or after it
    assert check[0] == "generation" and check[2].startswith("7:")
    current = fingerprint._present("generation", index)
    assert current.split(":")[1:] == check[2].split(":")[1:]


def test_a_reader_of_the_index_leaves_the_shortcut_standing(lab, quick):
    """Reading the index (ai-query, the dock: read-only) writes nothing, though SQLite running
    as root hands the -wal to the database's owner on every open, which moves its ctime."""
    repo, settings = lab
    assert quick(settings) is not None
    for _ in range(2):
        with Index.open(settings.index_path, readonly=True) as idx:
            assert idx.meta()["generation"]
        assert quick(settings) is not None


@pytest.mark.parametrize("secret, recorded", [("sk-abcdef123456", True), ("tracked", False),
                                              ("0.01", False), ("ab cd", False)])
def test_a_secret_the_log_line_would_hide_is_never_recorded(lab, quick, secret, recorded):
    """The record holds no secret: a secret value that redaction could find in the line (in its
    words, or in the time it ends with) leaves the run to the full path, which hides it."""
    repo, settings = lab
    env = {"AI_OPENAI_API_KEY": secret}
    for name in os.listdir(settings.ai_data_dir / fingerprint.FOLDER):
        os.unlink(settings.ai_data_dir / fingerprint.FOLDER / name)
    out = run_index(settings, env_extra=env)
    assert out.returncode == 0 and secret not in out.stderr.replace("2 tracked files", "")
    assert (quick(settings, **env) is not None) == recorded
    if recorded:
        assert secret not in (settings.ai_data_dir / fingerprint.FOLDER / os.listdir(
            settings.ai_data_dir / fingerprint.FOLDER)[0]).read_text(errors="replace")
        assert quick(settings, AI_OPENAI_API_KEY="tracked") is None  # now it would show


def test_a_warning_about_the_settings_is_printed_as_the_full_path_prints_it(lab):
    """The shortcut reads no settings: a run with something to warn about takes the full path,
    which says it in the command's words, every time."""
    repo, settings = lab
    for _ in range(2):
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


def test_the_earlier_format_beside_the_index_is_removed_when_recording(lab, quick):
    repo, settings = lab
    stale = settings.index_path.with_name(settings.index_path.name + ".fingerprint")
    stale.write_text("varaverk-fingerprint 1\n")
    for name in os.listdir(settings.ai_data_dir / fingerprint.FOLDER):
        os.unlink(settings.ai_data_dir / fingerprint.FOLDER / name)
    assert run_index(settings).stderr.startswith(UP_TO_DATE)
    assert quick(settings) is not None and not stale.exists()
