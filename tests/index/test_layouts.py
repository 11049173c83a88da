"""Real layouts: every tracked Markdown and reStructuredText file is documentation by default;
changelogs and licences are left out (AI_GLOBS_SKIP); the exclusion globs stay absolute."""

from __future__ import annotations

from varaverk.config import Settings
from varaverk.documents import tracked_files
from varaverk.index.classify import list_all
from tests.support.repos import make_repo

FILES = {
    "README.md": "# Lab\n",
    "talos/cilium-install.md": "# Cilium\nInstall with helm.\n",
    "notes/backups.md": "# Backups\nRestic every night.\n",
    "kubernetes/apps/media/README.md": "# Media\n",
    "site/guide.markdown": "# Guide\n",
    "site/page.mdx": "# Page\n",
    "docs/api/index.rst": "API\n===\n",
    "ansible/roles/nas/NOTES.rst": "Notes\n=====\n",
    "Backup/README-Backup.md": "# Backup\n",
    "Docs/Manual-Install.md": "# Install\n",
    "CHANGELOG.md": "# Changelog\n## 1.0\n",
    "docs/changelog.md": "# Changelog\n",
    "charts/app/CHANGELOG.md": "# Changelog\n",
    "HISTORY.rst": "History\n=======\n",
    "NEWS.md": "# News\n",
    "RELEASE_NOTES.md": "# Release notes\n",
    "LICENSE": "MIT License\n",
    "LICENSE.md": "# MIT License\n",
    "COPYING": "GPL\n",
    "NOTICE.txt": "Notice\n",
    "CODE_OF_CONDUCT.md": "# Code of conduct\n",
    ".github/PULL_REQUEST_TEMPLATE.md": "## Checklist\n",
    ".github/ISSUE_TEMPLATE/bug.md": "## Steps\n",
    ".github/CONTRIBUTING.md": "# Contributing\nRun make test.\n",
    "Configurations/notes.md": "# real configuration, never read\n",
    "app/.env": "PASSWORD=x\n",
    "src/main.go": "package main\n",
}


def kinds(tmp_path, **changes) -> dict[str, str]:
    repo = make_repo(tmp_path / "repo", FILES)
    settings = Settings(ai_repo_root=repo, ai_data_dir=tmp_path / "data", **changes)
    _listed, entries = list_all(settings, tracked_files.KindMatcher.from_settings(settings))
    return {e.path: e.kind for e in entries}


def test_every_markdown_and_rst_file_is_documentation_by_default(tmp_path):
    found = kinds(tmp_path)
    for path in ("README.md", "talos/cilium-install.md", "notes/backups.md",
                 "kubernetes/apps/media/README.md", "site/guide.markdown", "site/page.mdx",
                 "docs/api/index.rst", "ansible/roles/nas/NOTES.rst"):
        assert found[path] == "doc", path
    # A glob that names a kind more precisely keeps it.
    assert found["Backup/README-Backup.md"] == "readme"
    assert found["Docs/Manual-Install.md"] == "manual"
    assert found["src/main.go"] == ""


def test_changelogs_licences_and_forms_are_left_out(tmp_path):
    found = kinds(tmp_path)
    assert found[".github/CONTRIBUTING.md"] == "doc"  # how to work on the repository: a doc
    for path in ("CHANGELOG.md", "docs/changelog.md", "charts/app/CHANGELOG.md", "HISTORY.rst",
                 "NEWS.md", "RELEASE_NOTES.md", "LICENSE", "LICENSE.md", "COPYING",
                 "NOTICE.txt", "CODE_OF_CONDUCT.md", ".github/PULL_REQUEST_TEMPLATE.md",
                 ".github/ISSUE_TEMPLATE/bug.md"):
        assert found[path] == "", path


def test_an_empty_skip_list_lets_changelogs_in(tmp_path):
    found = kinds(tmp_path, ai_globs_skip=())
    assert found["CHANGELOG.md"] == "doc" and found["HISTORY.rst"] == "doc"
    assert found["LICENSE"] == ""  # no kind's glob names it


def test_exclusions_stay_absolute_whatever_the_doc_globs_say(tmp_path):
    cases = ({}, {"ai_globs_skip": ()}, {"ai_globs_doc": ("**/*.md", "**/*")})
    for n, changes in enumerate(cases):
        found = kinds(tmp_path / str(n), **changes)
        assert found["Configurations/notes.md"] == "" and found["app/.env"] == ""
