"""What the settings are made of: where the conf file is, and each input ``load_settings`` reads.

``varaverk.config.load_settings`` builds the settings from the conf file, the environment and a
few facts of the host. This module names those inputs, so that a later process can tell without
loading the settings again (no python-dotenv, no typing, no pathlib) that they would come out the
same: the no-op ``ai-index`` (``varaverk.index.fingerprint``). An input is a ``(kind, argument)``
pair of strings and ``present(kind, argument)`` its value now, a string:

* ``ai-env``: every ``AI_*`` variable of the environment with its value, as a 128-bit BLAKE2b
  digest, so that no value (a key, a URL with a password) is written where the value is kept;
  two environments share a digest by chance with a probability of 2^-128;
* ``env NAME``: one other variable (``-`` when unset);
* ``home``: the folder ``~`` expands to; ``root``: ``tool_root()``; ``host``: this host's name;
* ``realpath PATH``: ``PATH`` with every symbolic link resolved (against the working folder when
  relative), as ``Path.resolve`` gives it;
* ``lstat PATH``: ``stat_key(PATH)``.

Only ``os``, ``time`` and BLAKE2: this module is the first the no-op path loads.
"""

from __future__ import annotations

import os
import time

try:
    from _blake2 import blake2b  # hashlib's own BLAKE2, without the OpenSSL bindings it loads
except ImportError:  # an interpreter built without it: hashlib's, which costs more
    from hashlib import blake2b

# Read by every load whatever the conf says (the defaults of AI_DATA_DIR, AI_LOG_DIR,
# AI_REPO_ROOT, AI_HOST_NAME and "~" in any path), so each load notes them all.
ALWAYS_READ = (("ai-env", ""), ("env", "XDG_DATA_HOME"), ("env", "XDG_STATE_HOME"),
               ("home", ""), ("root", ""), ("host", ""))


def tool_root() -> str:
    """The repository the tool runs from: the nearest folder above this package holding
    ``.git`` (a folder, or a file in a worktree or submodule checkout).

    Falls back to the folder holding ``AI/`` when there is none (a plain copy). Found by walking
    up rather than asking git, because every command pays for this on start-up.
    """
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    folder = here
    while not os.path.exists(os.path.join(folder, ".git")):
        parent = os.path.dirname(folder)
        if parent == folder:
            return here
        folder = parent
    return folder


def xdg_dir(variable: str, fallback: str) -> str:
    """``$variable/varaverk``, or ``~/<fallback>/varaverk`` when the variable is unset or empty
    (``XDG_DATA_HOME``, ``.local/share``: the default of ``AI_DATA_DIR``)."""
    base = os.environ.get(variable) or os.path.join(os.path.expanduser("~"), fallback)
    return os.path.join(base, "varaverk")


def conf_path(config_path: str | os.PathLike | None, root: str) -> str:
    """The conf file a load reads: ``config_path`` (``--config``), else ``$AI_CONFIG``, else
    ``Configurations/master.conf`` of ``root`` (``tool_root()``). It may not exist."""
    explicit = config_path or os.environ.get("AI_CONFIG")
    if explicit:
        return os.fspath(explicit)
    return os.path.join(root, "Configurations", "master.conf")


def stat_key(path: str) -> str:
    """``lstat`` of ``path`` as ``"size mtime_ns ctime_ns inode device mode"``, or
    ``"error <errno>"``: equal keys mean the same file, unchanged (git's rule: ctime cannot be
    set back by any user tool, so an edit with its mtime put back still shows)."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"error {exc.errno}"
    return (f"{st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} {st.st_ino} {st.st_dev} "
            f"{st.st_mode}")


def present(kind: str, argument: str) -> str:
    """The value of the input ``(kind, argument)`` now (see the module); ValueError for an
    unknown kind."""
    if kind == "lstat":
        return stat_key(argument)
    if kind == "realpath":
        return os.path.realpath(argument)
    if kind == "env":
        value = os.environ.get(argument)
        return "-" if value is None else "=" + value
    if kind == "ai-env":
        items = sorted((key, value) for key, value in os.environ.items() if key.startswith("AI_"))
        return blake2b(repr(items).encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()
    if kind == "home":
        return os.path.expanduser("~")
    if kind == "root":
        return tool_root()
    if kind == "host":
        return os.uname().nodename
    raise ValueError(f"unknown input kind {kind!r}")


class Inputs:
    """What one ``load_settings`` read from ``os.environ``, the host and the conf file.

    Attributes:
        config_path: the ``--config`` value the load was given ("" for none).
        noted: ``[(kind, argument, value)]``, each input with its value when it was read.
        warned: whether the load warned (an unknown key, a ``$VAR`` kept literally).
        started_ns: ``time.time_ns()`` before anything was read: a file changed at or after it
            may change again within one tick of the clock without its stat showing it.
    """

    def __init__(self, config_path: str | os.PathLike | None = None):
        self.config_path = os.fspath(config_path) if config_path else ""
        self.noted: list[tuple[str, str, str]] = []
        self.warned = False
        self.started_ns = time.time_ns()

    def note(self, kind: str, argument: str = "") -> str:
        """Record the input ``(kind, argument)`` with its present value, and return the value."""
        value = present(kind, argument)
        self.noted.append((kind, argument, value))
        return value

    def note_conf(self, path: str) -> None:
        """Record the inputs every load reads (``ALWAYS_READ``) and the conf file at ``path``:
        where it resolves to, and that file's stat (an error when there is none)."""
        for kind, argument in ALWAYS_READ:
            self.note(kind, argument)
        self.note("lstat", self.note("realpath", path))

    def watching(self, warn):
        """``warn`` wrapped so that a call also sets ``warned``."""
        def noted_warning(message: str) -> None:
            self.warned = True
            warn(message)
        return noted_warning
