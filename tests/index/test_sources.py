"""Tracked documents: listing (B01, B02, B04), kinds by glob, disk checks and decoding (B08, B10, B11)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.repos import git, make_repo
from varaverk.documents import tracked_files
from varaverk.config import Settings
from varaverk.documents.tracked_files import KindMatcher, compile_globs, decode, list_tracked


def test_b01_exact_names_from_ls_files_z(tmp_path):
    repo = make_repo(tmp_path / "r", {
        "docs/Manual-Übersicht.md": b"# \xc3\x9cbersicht\n",
        "notes/Meeting Notes.md": b"# Meeting\n",
        'notes/My "draft".md': b"# Draft\n",
    })
    paths = [e.path for e in list_tracked(repo).entries]
    assert sorted(paths) == sorted(["docs/Manual-Übersicht.md", "notes/Meeting Notes.md",
                                    'notes/My "draft".md'])
    for p in paths:  # every name opens as given
        assert (repo / p).is_file()


def test_b01_non_utf8_name_is_decoded_with_surrogateescape(tmp_path):
    repo = make_repo(tmp_path / "r", {})
    raw = os.fsencode(str(repo)) + b"/README-caf\xe9.md"
    with open(raw, "wb") as fh:
        fh.write(b"# Cafe\n")
    git(repo, "add", "-A")
    (entry,) = list_tracked(repo).entries
    assert os.fsencode(entry.path) == b"README-caf\xe9.md"
    assert not tracked_files.is_valid_name(entry.path)
    assert tracked_files.printable_name(entry.path) == "README-caf\\xe9.md"


def test_b02_submodule_by_mode_and_rm_file_missing(tmp_path):
    sub = make_repo(tmp_path / "theme", {"README.md": b"# Theme\n"})
    repo = make_repo(tmp_path / "super", {"README.md": b"# Super\n", "Manual-old.md": b"# Old\n"})
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "docs/theme")
    git(repo, "commit", "-q", "-m", "submodule")
    (repo / "Manual-old.md").unlink()
    listing = list_tracked(repo)
    modes = {e.path: e.mode for e in listing.entries}
    assert modes["docs/theme"] == "160000"
    assert "docs/theme/README.md" not in modes
    by_path = {e.path: e for e in listing.entries}
    assert tracked_files.lstat_entry(repo, by_path["docs/theme"]) == (None, tracked_files.REASON_SUBMODULE)
    assert tracked_files.lstat_entry(repo, by_path["Manual-old.md"]) == (None, tracked_files.REASON_MISSING)
    st, reason = tracked_files.lstat_entry(repo, by_path["README.md"])
    assert reason == "" and st.st_size == len(b"# Super\n")


def test_b04_empty_repository_and_staged_files(tmp_path):
    repo = make_repo(tmp_path / "empty", {})
    listing = list_tracked(repo)
    assert listing.entries == () and listing.head is None
    (repo / "README.md").write_bytes(b"# R\n")
    git(repo, "add", "README.md")
    listing = list_tracked(repo)
    assert [e.path for e in listing.entries] == ["README.md"]
    assert listing.head is None  # still no commit


def test_b04_detached_head_gives_the_sha(tmp_path):
    repo = make_repo(tmp_path / "r", {"README.md": "# R\n"})
    sha = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "--detach")
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "HEAD"
    assert list_tracked(repo).head == sha


def test_not_a_repository_raises_sources_error(tmp_path):
    with pytest.raises(tracked_files.SourcesError, match="cannot list tracked files"):
        list_tracked(tmp_path)


@pytest.mark.parametrize("glob,path,matches", [
    ("**/*.sh", "a.sh", True),
    ("**/*.sh", "x/y/a.sh", True),
    ("**/*.sh", "a.shx", False),
    ("README.md", "README.md", True),
    ("README.md", "x/README.md", False),
    ("**/README.md", "x/y/README.md", True),
    ("docs/**/*.md", "docs/a.md", True),
    ("docs/**/*.md", "docs/x/y/a.md", True),
    ("docs/**/*.md", "other/docs/a.md", False),
    ("docs/**", "docs/x/y", True),
    ("Deployment/*.template", "Deployment/a.template", True),
    ("Deployment/*.template", "Deployment/x/a.template", False),
    ("Notes_*.md", "Notes_AI-Design.md", True),
    ("a?c", "abc", True),
    ("a?c", "a/c", False),
    ("[!a]b", "cb", True),
    ("[!a]b", "ab", False),
    ("file[1-3].md", "file2.md", True),
    ("a.b", "axb", False),  # dots are literal
    ("**/README-*.md", "Docs/README-Réseau.md", True),
    ("**", "a/b/c.md", True),
    ("**", ".github/workflows/ci.yml", True),  # "**" crosses hidden folders too
    ("**/README.md", "README.md", True),       # zero folders
    ("**/README.md", "Backup/rsync/README.md", True),
    ("**/README.md", "Backup/README.md.orig", False),
    ("**/README-*.md", "Backup/rsync/README-Mirror.md", True),
    ("**/README-*.md", "README-Top.md", True),
    ("*.example", "master.conf.example", True),
    ("*.example", "Configurations.example/master.conf", False),
    ("*.example", "sub/app.example", False),    # no "/": top level only
    ("**/*.env.example", "svc/app.env.example", True),
    ("**/*.env.example", "svc/app.env", False),
    ("**/.env.example", ".env.example", True),
    ("**/*.conf.example", "Configurations.example/hosts.conf.example", True),
    ("a[!x]b", "a/b", False),                   # a class never matches the folder separator
    ("a/**/b", "a/b", True),
    ("README.md", "README.md\n", False),        # a name ending in a newline is another name
])
def test_glob_matching(glob, path, matches):
    assert bool(compile_globs([glob]).match(path)) is matches


def test_default_kinds_first_match_wins():
    matcher = KindMatcher.from_settings(Settings(ai_repo_root=os.getcwd()))
    assert matcher.kind_of("Backup/rsync_mirror.sh") == "header"
    assert matcher.kind_of("Plugin/include/AskDocs.php") == "header"
    assert matcher.kind_of("Docs/README-AI.md") == "readme"
    assert matcher.kind_of("docs/README-x.md") == "readme"  # not doc, though docs/**/*.md matches
    assert matcher.kind_of("Docs/Manual-Install.md") == "manual"
    assert matcher.kind_of("Deployment/master.conf.template") == "template"
    assert matcher.kind_of("README.md") == "doc"
    assert matcher.kind_of("Notes_AI-Design.md") == "doc"
    assert matcher.kind_of("Media/logo.png") is None
    assert matcher.kind_of(".gitignore") is None
    assert matcher.kind_of("Configurations/master.conf") is None
    assert matcher.kind_of("Backup/rsync/README.md") == "doc"
    assert matcher.kind_of("Backup/rsync/README-Mirror.md") == "readme"
    assert matcher.kind_of("Configurations.example/hosts.conf.example") == "template"
    assert matcher.kind_of("svc/.env.example") == "template"


def test_symlinks_are_never_followed(tmp_path):
    outside = tmp_path / "secret.md"
    outside.write_text("# Secret\nCANARY\n")
    repo = make_repo(tmp_path / "r", {"README.md": "# R\n"})
    os.symlink(outside, repo / "README-out.md")
    os.symlink("README.md", repo / "README-in.md")
    git(repo, "add", "-A")
    by_path = {e.path: e for e in list_tracked(repo).entries}
    assert by_path["README-out.md"].mode == "120000"
    assert tracked_files.lstat_entry(repo, by_path["README-out.md"])[1] == tracked_files.REASON_SYMLINK_OUT
    assert tracked_files.lstat_entry(repo, by_path["README-in.md"])[1] == tracked_files.REASON_SYMLINK_IN


def test_decode_utf8_bom_crlf_and_cr():
    d = decode(b"\xef\xbb\xbf---\r\ntitle: Tool\r\n---\r\n# Install\rRun make.\r\n")
    assert d.text == "---\ntitle: Tool\n---\n# Install\nRun make.\n"
    assert d.encoding == "utf-8-sig" and d.warning == ""
    assert "\ufeff" not in d.text and "\r" not in d.text


def test_b08_cp1252_fallback_keeps_every_character():
    d = decode(b"* Prices\nCoffee costs 2\xa2 here\n")
    assert d.text == "* Prices\nCoffee costs 2\u00a2 here\n"
    assert d.encoding == "cp1252"
    assert "cp1252" in d.warning and "invalid UTF-8 at byte 23" in d.warning


def test_bytes_undefined_in_cp1252_fall_back_to_latin1():
    d = decode(b"x\x81y")
    assert d.text == "x\x81y" and d.encoding == "latin-1"


def test_binary_is_detected_by_nul_in_first_8k():
    assert decode(b"\x89PNG\r\n\x1a\n\0\0\0").text is None
    assert decode(b"a" * 9000 + b"\0").text is not None  # NUL beyond the sniffed prefix


def test_oversized_document_is_skipped_without_reading(tmp_path, monkeypatch):
    repo = make_repo(tmp_path / "r", {"README.md": "# R\n" + "x" * 100})
    monkeypatch.setattr(tracked_files, "MAX_DOCUMENT_BYTES", 50)
    (entry,) = list_tracked(repo).entries
    st, reason = tracked_files.lstat_entry(repo, entry)
    assert reason == tracked_files.REASON_TOO_LARGE and st.st_size == 104


def test_scripts_without_an_extension_are_classified_by_shebang(tmp_path):
    repo = make_repo(tmp_path / "r", {
        "bin/rotate": "#!/bin/sh -e\n# Rotate recordings.\n",
        "bin/prune": "#!/usr/bin/env -S python3 -u\n'''Prune.'''\n",
        "bin/notes": "Just a text file without an extension.\n",
        "bin/tool.postinst": "#!/bin/sh\n# not executable, has an extension\n",
        "bin/run.command": "#!/bin/bash\n# executable, has an extension\n",
        "bin/node-thing": "#!/usr/bin/env node\n// another language\n",
    })
    os.chmod(repo / "bin/run.command", 0o755)
    git(repo, "add", "--chmod=+x", "bin/run.command")
    os.symlink(repo / "bin/rotate", repo / "bin/linked")
    git(repo, "add", "bin/linked")
    listing = list_tracked(repo)
    kinds = {e.path: tracked_files.shebang_kind(repo, e) for e in listing.entries}
    assert kinds == {"bin/rotate": "header", "bin/prune": "header", "bin/notes": None,
                     "bin/tool.postinst": None, "bin/run.command": "header",
                     "bin/node-thing": None, "bin/linked": None}


def test_default_globs_cover_commented_configuration_files():
    matcher = KindMatcher.from_settings(Settings())
    for path in ("app/.env.example", "stack/media.env", "mail/main.cf", "nginx/site.conf",
                 "x/settings.env.tmpl", "compose.yaml", "svc/docker-compose.override.yml",
                 "docs/sample_config.yaml", "etc/app.ini.sample", "cfg/app.toml.example",
                 "ansible/ansible.cfg", "inventory/hosts.ini"):
        assert matcher.kind_of(path) == "template", path
    for path in ("README.rst", "docs/setup.rst", "debian/synctl.ronn"):
        assert matcher.kind_of(path) == "doc", path


def test_kind_matcher_compiles_its_globs_on_first_use():
    """A matcher nobody asks costs no glob translation (a no-op refresh builds one)."""
    probe = ("import sys\nfrom varaverk.documents.tracked_files import KindMatcher\n"
             "m = KindMatcher({'readme': ['**/README-*.md']}, ['old/**'])\n"
             "print('wcmatch' in sys.modules)\n"
             "print(m.kind_of('a/README-x.md'), m.kind_of('old/README-x.md'), m.excluded('old/y'))\n"
             "print('wcmatch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:3] == ["False", "readme None True", "True"]


def test_classifier_stamp_covers_the_glob_code():
    stamp = tracked_files.classifier_stamp()
    assert len(stamp) == 8 and stamp == tracked_files.classifier_stamp()
