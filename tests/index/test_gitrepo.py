"""varaverk.gitrepo: the one way the library runs git, on real repositories in a tmp folder."""

from __future__ import annotations

import subprocess

from tests.support.repos import make_repo
from varaverk import gitrepo


def test_short_head_is_the_commit_id_or_none(tmp_path):
    repo = make_repo(tmp_path / "r", {"README.md": "# R\n"})
    full = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    head = gitrepo.short_head(repo)
    assert head and full.startswith(head) and len(head) < len(full)
    (tmp_path / "plain").mkdir()
    assert gitrepo.short_head(tmp_path / "plain") is None
    subprocess.run(["git", "init", "-q", str(tmp_path / "empty")], check=True)
    assert gitrepo.short_head(tmp_path / "empty") is None


def test_spawn_never_prompts_for_credentials(tmp_path):
    repo = make_repo(tmp_path / "r", {"README.md": "# R\n"})
    # A git alias starting with "!" runs `env`, which prints the environment git was given.
    proc = gitrepo.spawn(repo, "-c", "alias.showenv=!env", "showenv")
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert "GIT_TERMINAL_PROMPT=0" in out.decode().splitlines()
