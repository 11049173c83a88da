"""The no-op shortcut: a record of everything a refresh's "nothing to do" rests on.

When a full refresh of a command (``ai-index``) finds nothing to do, it records, in
``AI_DATA_DIR/fingerprints/<8 hex>``, each input of that verdict with its value then, as
``(kind, argument, value)`` strings (``varaverk.config_inputs.present`` gives the kinds):

* every input the settings were loaded from (``config_inputs.Inputs``): the ``AI_*``
  environment, the conf file's resolved path and ``lstat``, the defaults' sources;
* the resolved repository path, which names the index file;
* the ``lstat`` of the code that loads settings, lists, classifies and chunks (the modules and
  folders of ``varaverk.index``, the chunkers, masking, ``config``, ``gitrepo``,
  ``named_sources`` and wcmatch's translator);
* ``git``: HEAD, the git index file and the folder's prefix (``gitrepo.STATE``), and the
  ``lstat`` of that git index file: while it is unchanged, so is what ``git ls-files`` lists;
* the ``lstat`` of the SQLite index file and of its ``-wal`` (``_wal_key``: any commit changes
  one of them), or, when either was written too recently to vouch for it, ``generation``: the
  index's write counter, inode and device, read with SQLite;
* the ``lstat`` of every tracked path and of every folder holding one.

A later ``ai-index`` (``unchanged_summary``) finds the record from its command line and
environment alone (``record_path``), compares every value with the present one and, when all
are equal, ends with the recorded log line: one ``git rev-parse`` and a stat per path, no
settings loaded, no SQLite. Values are compared as stored, not as a digest of them all (only the
``AI_*`` environment is kept as its 128-bit digest, so that no value of it is written down), so
no checksum collision can pass a change. The record's name is a CRC-32 of the conf file's path
and ``AI_REPO_ROOT``: two configurations sharing a name only take turns overwriting it.

Nothing is recorded when a stat is racy (git's rule, as in
``varaverk.index.change_detection``): a time at or after the run's start less
``RACY_SLACK_NS``, so a file changed at any time after the check began has a newer ctime than
the recorded one (no user tool sets ctime back). Nor when the settings warned, name
``AI_SOURCES``, or hold a secret the log line's redaction could change, nor for an index of the
older layout. The record holds no secret, and a secret changed since is a changed input
(``ai-env``, the conf file's stat). The file is a cache: a missing, unreadable or foreign one
only costs the full path, which writes it again.

Only ``os``, ``zlib``, ``config_inputs`` and ``gitrepo`` (with subprocess) at import: this is the
no-op path. What recording needs is imported by ``record``.
"""

from __future__ import annotations

import contextlib
import os
import zlib

from varaverk import config_inputs, gitrepo
from varaverk.log_files import redactable

FORMAT = "varaverk-fingerprint 2"
FOLDER = "fingerprints"
# Git's racy-timestamp slack: file times may come from a coarse kernel clock, up to a tick
# behind ours (shared with change_detection's racy rule).
RACY_SLACK_NS = 10_000_000
# Every character the time a log line ends with (" in 0.01 s") can hold.
_TIME_CHARACTERS = frozenset(" in0123456789.s")
_INDEX_PACKAGE = os.path.dirname(os.path.abspath(__file__))
_SINGLE_MODULES = ("config.py", "config_inputs.py", "named_sources.py", "gitrepo.py")
_WCMATCH_MODULES = ("__meta__.py", "_wcparse.py", "glob.py")
# Kinds every record holds: one without them is damaged, not a promise that nothing changed.
_REQUIRED = frozenset({"ai-env", "realpath", "git"})


def record_path(config_path: str | None) -> str | None:
    """Where the record of a run with ``--config config_path`` (None: none) and this
    environment lies: ``AI_DATA_DIR/fingerprints/<CRC-32 of the conf path and AI_REPO_ROOT>``,
    or None when ``AI_DATA_DIR`` is not an absolute path.

    ``AI_DATA_DIR`` is the environment's, else the conf file's last plain line setting it
    (``_conf_value``), else the default. That reading only locates the record: the record side
    writes only where it finds the settings' own folder.
    """
    conf = config_inputs.conf_path(config_path, config_inputs.tool_root())
    raw = os.environ.get("AI_DATA_DIR")
    if raw is None:
        raw = _conf_value(conf, "AI_DATA_DIR")
    raw = (raw or "").strip()
    data = (os.path.expanduser(raw) if raw
            else config_inputs.xdg_dir("XDG_DATA_HOME", os.path.join(".local", "share")))
    if not os.path.isabs(data):
        return None
    name = zlib.crc32(repr((conf, os.environ.get("AI_REPO_ROOT"))).encode())
    return os.path.join(data, FOLDER, f"{name:08x}")


def _conf_value(path: str, key: str) -> str | None:
    """The value of the last ``KEY=value`` line of the conf file at ``path`` (``export`` and one
    pair of quotes allowed); None when there is none or the file cannot be read."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError):
        return None
    found = None
    for line in text.splitlines():
        name, equals, value = line.strip().removeprefix("export ").partition("=")
        if equals and name.strip() == key:
            value = value.strip()
            quoted = len(value) >= 2 and value[0] in "'\"" and value[-1] == value[0]
            found = value[1:-1] if quoted else value
    return found


def unchanged_summary(config_path: str | None = None) -> tuple[str, str] | None:
    """``(log line head, log folder)`` of the last full run that found nothing to do, when
    every input it recorded has the same value now (see the module); else None (the full path
    decides). ``config_path``: the command's ``--config`` (None: none). Never writes anything.

    Raises:
        OSError, ValueError (a damaged record), sqlite3.Error: the caller takes the full path.
    """
    place = record_path(config_path)
    if place is None:
        return None
    try:
        with open(place, "rb") as handle:
            fields = handle.read().decode("utf-8", "surrogateescape").split("\0")
    except FileNotFoundError:
        return None
    if len(fields) < 4 or len(fields) % 3 != 1 or fields[0] != FORMAT \
            or fields[1] != (config_path or "") or not _REQUIRED <= set(fields[4::3]):
        return None
    head, log_dir = fields[3], fields[2]
    if not os.path.isabs(log_dir):
        return None
    for i in range(4, len(fields), 3):
        if _present(fields[i], fields[i + 1]) != fields[i + 2]:
            return None
    return head, log_dir


def _present(kind: str, argument: str) -> str:
    """``config_inputs.present``, and the kinds of this module: ``git`` (``gitrepo.STATE`` in
    the work tree ``argument``), ``wal`` (``_wal_key``) and ``generation`` (``index_identity``
    of an index file)."""
    if kind == "git":
        proc = gitrepo.spawn(argument, *gitrepo.STATE)
        out, _ = proc.communicate()
        return gitrepo.state_text(proc.returncode, out)
    if kind == "generation":
        return index_identity(argument, _generation(argument))
    if kind == "wal":
        return _wal_key(argument)
    return config_inputs.present(kind, argument)


def _could_redact(head: str, secrets: list[str | None]) -> bool:
    """Whether hiding ``secrets`` (``log_files.redact``) could change a log line ``head`` plus
    the time it took (``" in 0.01 s"``), whatever the time: a secret found in ``head``, or
    one that could reach into the time (one holding a space, which the time starts with, or
    made of the time's characters only)."""
    return any(secret in head or " " in secret or set(secret) <= _TIME_CHARACTERS
               for secret in redactable(secrets))


def record(settings, inputs: config_inputs.Inputs | None, listing, generation: str,
           started_ns: int, summary_head: str) -> bool:
    """Record the inputs of a full refresh that started at ``started_ns`` (``time.time_ns()``,
    before it listed anything) and found nothing to do in the index of that ``generation``.

    ``inputs``: what the settings were loaded from (None: not by a command, nothing is
    recorded); ``listing``: the ``classify.Listed`` the run checked; ``summary_head``: its log
    line without the time (``IndexReport.summary_head``). Returns whether it was recorded
    (not when a stat is racy, the settings warned, and the other cases the module names).
    """
    from varaverk.config import SECRET_KEYS

    secrets = [getattr(settings, key.lower()) for key in SECRET_KEYS]
    if inputs is None or inputs.warned or settings.ai_sources or not generation \
            or not summary_head.isprintable() or _could_redact(summary_head, secrets):
        return False
    place = record_path(inputs.config_path or None)
    index = _keyed_index(settings)
    if place is None or index is None or os.path.normpath(os.path.dirname(
            os.path.dirname(place))) != os.path.normpath(settings.ai_data_dir):
        return False
    racy_from = min(started_ns, inputs.started_ns) - RACY_SLACK_NS
    checks = _checks(settings, inputs, listing)
    if checks is None or any(kind == "lstat" and _racy(value, racy_from)
                             for kind, _, value in checks):
        return False
    checks += _index_checks(index, generation, racy_from)
    fields = [FORMAT, inputs.config_path, os.fspath(settings.ai_log_dir), summary_head]
    for check in checks:
        fields.extend(check)
    if any("\0" in field for field in fields):
        return False
    with contextlib.suppress(OSError):  # the earlier format's file beside the index, replaced
        os.unlink(index + ".fingerprint")
    return _write(place, "\0".join(fields).encode("utf-8", "surrogateescape"))


def _keyed_index(settings) -> str | None:
    """The index file's path when it is the one ``keyed_path`` names, else None (an index of
    the older layout is found by an SQLite read, which the shortcut does not make)."""
    from varaverk.index.store.location import keyed_path

    index = os.fspath(settings.index_path)
    return index if index == os.fspath(keyed_path(settings.ai_data_dir,
                                                  settings.ai_repo_root)) else None


def _checks(settings, inputs: config_inputs.Inputs, listing) -> list[tuple[str, str, str]] | None:
    """Every recorded input but the index file's, with its value now (the module lists
    them); None when git failed or the repository's path no longer resolves to itself."""
    root = os.fspath(listing.root)
    git_index = gitrepo.state_index_file(root, listing.git_state)
    if git_index is None:
        return None
    repo = os.fspath(settings.ai_repo_root)
    if os.path.realpath(repo) != repo:  # a link made meanwhile: the index path says otherwise
        return None
    checks = [*inputs.noted, ("realpath", repo, repo)]
    checks += [("lstat", path, config_inputs.stat_key(path)) for path in _code_paths()]
    checks.append(("git", root, listing.git_state))
    checks.append(("lstat", git_index, config_inputs.stat_key(git_index)))
    checks += [("lstat", path, config_inputs.stat_key(path)) for path in _tracked_paths(listing)]
    return checks


def _index_checks(index: str, generation: str, racy_from: int) -> list[tuple[str, str, str]]:
    """The SQLite index's checks: the ``lstat`` of the file and the ``wal`` key of its
    ``-wal``, or, when one was written at or after ``racy_from``, its ``generation``
    (``index_identity``)."""
    main = config_inputs.stat_key(index)
    wal = _wal_key(index + "-wal")
    size, _, rest = wal.partition(" ")
    # An empty -wal holds no commit: one made later either fills it or, checkpointed, changes
    # the index file itself.
    if _racy(main, racy_from) or (size not in ("error", "0")
                                  and int(rest.split()[0]) >= racy_from):
        return [("generation", index, index_identity(index, generation))]
    return [("lstat", index, main), ("wal", index + "-wal", wal)]


def _wal_key(path: str) -> str:
    """``stat_key`` of an SQLite ``-wal`` file without its ctime: SQLite running as root hands
    the file to the database's owner (``fchown``) on every open, a reader's too, which moves
    the ctime of an unchanged file. A commit still grows the file or rewrites it (its mtime)."""
    key = config_inputs.stat_key(path)
    if key.startswith("error"):
        return key
    size, mtime, _, rest = key.split(" ", 3)
    return f"{size} {mtime} {rest}"


def _racy(key: str, racy_from: int) -> bool:
    """Whether the ``stat_key`` ``key`` shows an mtime or ctime at or after ``racy_from``."""
    parts = key.split()
    return parts[0] != "error" and max(int(parts[1]), int(parts[2])) >= racy_from


def _code_paths() -> list[str]:
    """Every module and folder of the code a no-op's verdict stands for (see the module):
    an upgrade or an edit changes their stats, and a new module its folder's."""
    import importlib.util

    from varaverk.documents.stamp import STAMPED_PACKAGES

    package = os.path.dirname(_INDEX_PACKAGE)
    paths = [os.path.join(package, name) for name in _SINGLE_MODULES]
    for top in (_INDEX_PACKAGE, *map(os.fspath, STAMPED_PACKAGES)):
        for folder, subfolders, names in os.walk(top):
            subfolders[:] = sorted(f for f in subfolders if f != "__pycache__")
            paths.append(folder)
            paths += [os.path.join(folder, name) for name in sorted(names) if name.endswith(".py")]
    spec = importlib.util.find_spec("wcmatch")
    if spec is not None and spec.origin:
        folder = os.path.dirname(spec.origin)
        paths += [folder, *(os.path.join(folder, name) for name in _WCMATCH_MODULES)]
    return paths


def _tracked_paths(listing) -> list[str]:
    """Every tracked path of ``listing`` and every folder holding one, under its root."""
    root = os.fspath(listing.root)
    paths, folders = [], set()
    for entry in listing.entries:
        paths.append(os.path.join(root, entry.path))
        folder = os.path.dirname(entry.path)
        while folder and folder not in folders:
            folders.add(folder)
            folder = os.path.dirname(folder)
    return paths + [os.path.join(root, folder) for folder in sorted(folders)]


def _write(place: str, body: bytes) -> bool:
    """Write the record at ``place`` atomically; whether it was written."""
    from pathlib import Path

    from varaverk.atomic_files import write_atomic  # tempfile: only when recording

    try:
        os.makedirs(os.path.dirname(place), exist_ok=True)
        write_atomic(Path(place), body, durable=False)  # a cache: one lost costs one full run
    except OSError:
        return False
    return True


def index_identity(index_path: str | os.PathLike, generation: str | None) -> str:
    """``generation``, inode and device of the index file: a file rebuilt, moved aside or
    restored from a backup is another index even where its write counter is the same."""
    st = os.stat(index_path)
    return f"{generation}:{st.st_ino}:{st.st_dev}"


def _generation(index_path: str) -> str | None:
    """The index's ``generation`` (its write counter), read only."""
    from varaverk.index.store.location import read_meta  # sqlite3: only when racy

    return read_meta(index_path, "generation")
