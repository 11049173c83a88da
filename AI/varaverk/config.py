"""Configuration: one typed view of master.conf plus the environment.

Sources, later ones winning:
  1. the defaults declared on ``Settings`` (each documented in Deployment/master.conf.template);
  2. the shell-style ``KEY=VALUE`` conf file (``Configurations/master.conf`` of the repository
     the tool runs from, or ``--config PATH``), parsed by python-dotenv without interpolation,
     so a value is taken literally and never executed;
  3. environment variables of the same name.

Keys the conf holds for other scripts are ignored: a homelab's master.conf is shared. Values
are checked at load: a number outside its range (``RANGES``) or a local embedding model that
is not shipped raises ConfigError naming the key and what it allows; an ``AI_*`` key that is
not a setting (``AI_TOPK``) is warned about with the nearest known name, and a conf value
holding ``$VAR`` is warned about (the conf is parsed literally, never expanded).
``AI_OPENAI_API_KEY`` and ``AI_DOCK_TOKEN`` are secrets: ``Settings.redacted()`` hides them and
``repr`` never shows them.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Callable, Mapping, NamedTuple

from varaverk import config_inputs, exitcodes
from varaverk.errors import VaraverkError
from varaverk.index.store.location import index_file


class ConfigError(VaraverkError, ValueError):
    """A configuration value that cannot be used; the message names the key and the source."""

    exit_code = exitcodes.CONFIG
    kind = "config"
    label = "configuration error"


def tool_root() -> Path:
    """The repository the tool runs from (``varaverk.config_inputs.tool_root``)."""
    return Path(config_inputs.tool_root())


def _xdg(var: str, fallback: str) -> Path:
    return Path(config_inputs.xdg_dir(var, fallback))


def _bool(key: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off", ""}:
        return False
    raise ConfigError(f"{key}: expected true or false, got {raw!r}")


def _int(key: str, raw: str, minimum: int | None = None) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(f"{key}: expected a whole number, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"{key}: must be at least {minimum}, got {value}")
    return value


def _float(key: str, raw: str) -> float:
    try:
        return float(raw.strip())
    except ValueError:
        raise ConfigError(f"{key}: expected a number, got {raw!r}") from None


def split_list(raw: str) -> list[str]:
    """Split a comma- or space-separated conf value into its non-empty items."""
    return [item for item in raw.replace(",", " ").split() if item]


SECRET_KEYS = frozenset({"AI_OPENAI_API_KEY", "AI_DOCK_TOKEN", "AI_FLEET_TOKEN"})
EMBED_BACKENDS = ("local", "ollama", "openai")
GEN_BACKENDS = ("ollama", "openai")
# AI_SUMMARIES: none, the extractive summary (no model), the generation model's, or (query)
# the extractive one stored and a summary made for each question in answers.
SUMMARY_MODES = ("off", "extractive", "model", "query")
# How memory digests a triplet: by the generation model (extractive while it fails), or
# extractively only (sentences as facts; never calls a model).
MEMORY_DIGESTS = ("model", "extractive")
# The one model the offline (local) backend ships, and the names it answers to.
LOCAL_MODEL = "all-MiniLM-L6-v2-int8"
LOCAL_ALIASES = frozenset({LOCAL_MODEL, "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"})
# Allowed (lowest, highest) of the numeric settings; both ends included.
RANGES: dict[str, tuple[float, float]] = {
    "ai_embed_batch": (1, 4096),
    "ai_index_batch": (1, 1_000_000),
    "ai_http_timeout": (0.1, 86400),
    "ai_top_k": (1, 1000),
    "ai_min_score": (0, 1),
    "ai_min_margin": (0, 1),
    "ai_index_lock_timeout": (0, 86400),
    "ai_token_retain_rows": (1, 100_000_000),
    "ai_dock_workers": (1, 256),
    "ai_dock_max_turns": (1, 1024),
    "ai_dock_max_streams": (1, 4096),
    "ai_dock_turn_retain_hours": (0.01, 8760),
    "ai_chat_history_max": (1, 1_000_000),
    "ai_summary_seconds": (0, 86400),
    "ai_summary_verbatim_docs": (1, 1000),
    "ai_query_summary_docs": (1, 100),
    "ai_query_summary_seconds": (1, 3600),
    "ai_memory_budget": (50, 100_000),
}
# Keys other than settings that Varaverk itself reads: not worth a "did you mean" warning.
OTHER_KNOWN_KEYS = frozenset({"AI_CONFIG"})
# $NAME, ${NAME} or $( in a conf value: written for a shell, which never sees the conf.
_SHELL_VARIABLE = r"\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*|\()"


def check_embed_model(backend: str, model: str) -> None:
    """Raise ConfigError naming AI_EMBED_MODEL when the local backend is asked for a model it
    does not ship (an empty model is the backend's default)."""
    if backend == "local" and model.strip() and model.strip() not in LOCAL_ALIASES:
        raise ConfigError(f"AI_EMBED_MODEL: the local backend ships only {LOCAL_MODEL}, got "
                          f"{model.strip()!r} (use AI_EMBED_BACKEND=ollama or openai for others, "
                          f"or leave AI_EMBED_MODEL empty)")


# The default AI_GLOBS_SKIP: changelogs and licences, in the spellings projects use, and the
# boilerplate that travels with them (code of conduct, issue and pull-request forms).
SKIP_GLOBS = ("**/CHANGELOG*", "**/Changelog*", "**/ChangeLog*", "**/changelog*", "**/CHANGES",
              "**/CHANGES.*", "**/HISTORY*", "**/History.*", "**/NEWS", "**/NEWS.*",
              "**/RELEASE_NOTES*", "**/RELEASE-NOTES*", "**/RELEASES.*", "**/LICENSE*",
              "**/LICENCE*", "**/License.*", "**/license.*", "**/COPYING*", "**/NOTICE*",
              "**/CODE_OF_CONDUCT*", "**/ISSUE_TEMPLATE*", "**/ISSUE_TEMPLATE/**",
              "**/PULL_REQUEST_TEMPLATE*", "**/PULL_REQUEST_TEMPLATE/**",
              "**/pull_request_template*")


class _Fields(NamedTuple):
    """The fields of ``Settings``, typed: their names are the conf keys in lower case. A field
    whose default is None and whose type does not allow None is filled by ``Settings`` from
    ``_FACTORIES`` (it depends on the host or the environment)."""

    ai_enabled: bool = False
    # The conf file in use (--config, AI_CONFIG or the default), resolved once by
    # load_settings; None: Configurations/master.conf of ai_repo_root (``conf_file``).
    ai_config: Path | None = None
    ai_repo_root: Path = None  # type: ignore[assignment]  # _FACTORIES
    ai_data_dir: Path = None  # type: ignore[assignment]  # _FACTORIES
    ai_log_dir: Path = None  # type: ignore[assignment]  # _FACTORIES
    ai_embed_backend: str = "local"
    ai_embed_model: str = ""  # empty: the backend's default model
    ai_embed_batch: int = 32
    # Chunks an index run reads before it embeds and writes them (one transaction still).
    ai_index_batch: int = 512
    ai_ollama_hosts: tuple[str, ...] = ("http://127.0.0.1:11434",)
    ai_openai_base_url: str = "http://127.0.0.1:8080/v1"
    ai_openai_api_key: str = ""
    ai_gen_backend: str = "ollama"
    ai_gen_model: str = "qwen2.5:3b"
    ai_gen_num_ctx: int = 8192
    ai_http_timeout: float = 120.0
    ai_top_k: int = 5
    # Optional reranking through a /v1/rerank server (llama.cpp, vLLM, TEI, LocalAI); off
    # while the URL is empty.
    ai_rerank_url: str = ""
    ai_rerank_model: str = ""
    ai_rerank_top_n: int = 20
    ai_rerank_api_key: str = ""
    ai_min_score: float = 0.0  # 0: use the calibrated default of the search module
    ai_min_margin: float = 0.0  # 0: use the calibrated default of the coverage module
    ai_index_lock_timeout: float = 60.0
    ai_index_on_pull: bool = False
    ai_host_name: str = None  # type: ignore[assignment]  # _FACTORIES
    ai_token_db: Path | None = None  # None: AI_DATA_DIR/tokens.db
    ai_token_retain_rows: int = 20000
    ai_token_cache_dir: Path = Path("/tmp/varaverk-tokens")
    ai_hosts_conf: Path | None = None  # None: Configurations/hosts.conf of the repository
    ai_fleet_token: str = ""
    ai_dock_bind: str = "127.0.0.1:8470"
    ai_dock_token: str = ""
    ai_dock_workers: int = 2
    # Answers generated at once over every worker; attached event streams per worker (each
    # holds one gunicorn thread); hours a finished turn's events stay in the turn log.
    ai_dock_max_turns: int = 8
    ai_dock_max_streams: int = 24
    ai_dock_turn_retain_hours: float = 24.0
    ai_chat_history_max: int = 10
    ai_conf_read_keys: tuple[str, ...] = ()
    ai_troubleshoot_log_dirs: tuple[str, ...] = ("/var/log",)
    ai_health_mounts: tuple[str, ...] = ("/",)
    ai_health_services: tuple[str, ...] = ()
    ai_incidents_log: Path | None = None
    # Which tracked files are which kind: space-separated globs ("**" crosses folders).
    ai_globs_header: tuple[str, ...] = ("**/*.sh", "**/*.bash", "**/*.py", "**/*.php", "**/*.pl")
    ai_globs_readme: tuple[str, ...] = ("**/README-*.md",)
    ai_globs_manual: tuple[str, ...] = ("**/Manual-*.md",)
    # Commented configuration: the comments are the documentation; a matching file without
    # any comment is left out (no chunks). Tracked files without an extension (and executable
    # ones matching no glob) are classified as header by their shebang.
    ai_globs_template: tuple[str, ...] = ("Deployment/*.template", "**/*.env", "**/.env.example",
                                          "**/*.env.example", "**/*.env.tmpl", "**/*.example",
                                          "**/*.sample", "**/*.conf", "**/*.cf", "**/*.cfg",
                                          "**/*.ini",
                                          "**/compose.yaml", "**/compose.yml",
                                          "**/docker-compose*.yml", "**/docker-compose*.yaml",
                                          "**/*.yml", "**/*.yaml")
    # Never documentation, whatever the kind globs say: real configuration tracked by mistake.
    ai_globs_exclude: tuple[str, ...] = ("Configurations/**", "**/.env")
    # Every Markdown and reStructuredText file: docs live wherever the repository keeps them.
    ai_globs_doc: tuple[str, ...] = ("**/*.md", "**/*.mdx", "**/*.markdown", "**/*.rst",
                                     "**/*.ronn")
    # Left out whatever the kind globs say, unlike AI_GLOBS_EXCLUDE a matter of noise, not
    # secrets: changelogs (version-by-version history sharing every feature's words) and
    # licences (legal boilerplate). Empty it to index them.
    ai_globs_skip: tuple[str, ...] = SKIP_GLOBS
    # Extra sources beside the repository: space-separated NAME=TYPE:PATH (named_sources).
    ai_sources: tuple[str, ...] = ()
    # Run evidence (troubleshoot): the jobs whose last runs are reported, and their status files.
    ai_run_jobs: tuple[str, ...] = ()
    ai_run_status_dir: Path | None = None  # None: only <job>.log under the log dirs is read
    # Document summaries (varaverk.summaries): off, extractive or model; made by
    # ai-index --summaries within ai_summary_seconds per run (0: no bound).
    ai_summaries: str = "off"
    ai_summary_seconds: float = 600.0
    # In answers, documents beyond this many go to the model as their summaries.
    ai_summary_verbatim_docs: int = 3
    # AI_SUMMARIES=query: at most this many summaries made for the question per answer, all
    # of them within ai_query_summary_seconds; the rest go as their stored summaries.
    ai_query_summary_docs: int = 3
    ai_query_summary_seconds: float = 20.0
    # Embed (and index lexically) each chunk with its document's title and first sentence.
    ai_contextual_chunks: bool = False
    # Long-term memory (varaverk.memory): off unless asked for; its own file under AI_DATA_DIR.
    ai_memory_enabled: bool = False
    ai_memory_budget: int = 600  # tokens of recalled memory in one prompt
    ai_memory_digest: str = "model"
    ai_memory_model: str = ""  # empty: AI_GEN_MODEL digests


# The defaults that depend on the host or the environment, made when a Settings is.
_FACTORIES = {
    "ai_repo_root": tool_root,
    "ai_data_dir": lambda: _xdg("XDG_DATA_HOME", ".local/share"),
    "ai_log_dir": lambda: _xdg("XDG_STATE_HOME", ".local/state") / "log",
    "ai_host_name": lambda: os.uname().nodename.split(".")[0],
}


class Settings(_Fields):
    """Every AI_* setting, typed (``_Fields``). Field names are the conf keys in lower case.

    Build with ``load_settings``; tests may construct one directly (keywords) or use
    ``replace``. Paths are absolute. Durations are seconds. Immutable. A named tuple rather
    than a dataclass: every command builds one on start-up, and ``dataclasses`` imports
    ``inspect`` (and with it ``ast``, ``dis`` and ``tokenize``), which the no-op refresh
    cannot afford (tests/benchmarks/bench_refresh.py).
    """

    __slots__ = ()

    def __new__(cls, *args, **values):
        if not args:
            for name, make in _FACTORIES.items():
                if values.get(name) is None:
                    values[name] = make()
        return super().__new__(cls, *args, **values)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in zip(self._fields, self)
                          if name.upper() not in SECRET_KEYS)
        return f"Settings({shown})"

    @property
    def index_path(self) -> Path:
        """This repository's SQLite index file under ``AI_DATA_DIR`` (one per repository:
        ``varaverk.index.store.location.index_file``)."""
        return index_file(self.ai_data_dir, self.ai_repo_root)

    @property
    def conf_file(self) -> Path:
        """The one conf file this configuration came from, read again by capabilities
        (``known_secrets``, conf lookup): ``AI_CONFIG`` as resolved, else the default."""
        return self.ai_config or default_config_path(self.ai_repo_root)

    @property
    def token_db_path(self) -> Path:
        """This host's ledger: ``AI_TOKEN_DB`` or ``AI_DATA_DIR/tokens.db``."""
        return self.ai_token_db or self.ai_data_dir / "tokens.db"

    @property
    def memory_path(self) -> Path:
        """This host's long-term memory: ``AI_DATA_DIR/memory.db`` (one per host, not per
        repository: what was said is the operator's, whichever repository answered)."""
        return self.ai_data_dir / "memory.db"

    @property
    def hosts_conf_path(self) -> Path:
        """The fleet's hosts conf: ``AI_HOSTS_CONF`` or ``Configurations/hosts.conf``."""
        return self.ai_hosts_conf or self.ai_repo_root / "Configurations" / "hosts.conf"

    def replace(self, **changes) -> "Settings":
        """A copy with some fields changed; ValueError names an unknown field."""
        return self._replace(**changes)

    def redacted(self) -> dict[str, str]:
        """All settings as conf-style strings with secrets shown as ``<set>`` or ``<unset>``."""
        out = {}
        for name, value in zip(self._fields, self):
            key = name.upper()
            if key in SECRET_KEYS:
                out[key] = "<set>" if value else "<unset>"
            elif isinstance(value, tuple):
                out[key] = " ".join(value)
            else:
                out[key] = "" if value is None else str(value)
        return out


def _field_type(name: str) -> str:
    """The annotation of the field ``name`` as written (``"Path | None"``): typing keeps the
    string annotations of a named tuple as ``ForwardRef``s."""
    kind = _Fields.__annotations__[name]
    return getattr(kind, "__forward_arg__", kind)


def _convert(kind: str, key: str, raw: str, base: Path):
    """``raw`` as the type named by ``kind`` (the field's annotation: ``"int"``,
    ``"Path | None"``, ``"tuple[str, ...]"``...)."""
    raw = raw.strip()
    if kind == "bool":
        return _bool(key, raw)
    if kind == "int":
        return _int(key, raw, minimum=0)
    if kind == "float":
        return _float(key, raw)
    if kind.startswith("tuple"):
        return tuple(split_list(raw))
    if kind.startswith("Path"):
        if not raw:
            return None if "None" in kind else base
        path = Path(os.path.expanduser(raw))
        return path if path.is_absolute() else (base / path)
    return raw


def default_config_path(repo_root: Path | None = None) -> Path:
    """``Configurations/master.conf`` of the repository the tool runs from."""
    return (repo_root or tool_root()) / "Configurations" / "master.conf"


def add_config_option(parser) -> None:
    """Add the ``--config PATH`` option every entry point takes (``argparse`` parser); its value
    goes to ``load_settings``/``load_settings_or_report``."""
    parser.add_argument("--config", metavar="PATH", help="conf file to read (default: "
                        "$AI_CONFIG, else Configurations/master.conf of the repository)")


def log_warning(message: str) -> None:
    """Log ``message`` as a warning of ``varaverk.config`` (``load_settings``' default ``warn``).
    logging is imported here, not at the top: the no-op ``ai-index`` reads the settings
    without it (``varaverk.index.fingerprint``)."""
    import logging

    logging.getLogger("varaverk.config").warning("%s", message)


def load_settings(config_path: str | os.PathLike | None = None,
                  environ: Mapping[str, str] | None = None,
                  warn: Callable[[str], None] = log_warning,
                  inputs: config_inputs.Inputs | None = None) -> Settings:
    """Read the conf file (if present) and the environment into ``Settings``.

    Args:
        config_path: an explicit conf file (``--config``); it must exist. ``None`` reads
            ``AI_CONFIG`` from the environment, else the default conf, which may be absent.
        environ: the environment to read (default ``os.environ``).
        warn: called with each warning's text (an unknown ``AI_*`` key, a ``$VAR`` kept
            literally); by default logged (``log_warning``).
        inputs: when given (with ``environ`` None), every input the load reads is noted in it
            with its value, and whether it warned (``varaverk.config_inputs.Inputs``).

    Relative paths in values resolve against the repository root. Raises ConfigError for a
    missing explicit conf, an unreadable file or a value of the wrong type, naming the key.
    """
    env = os.environ if environ is None else environ
    explicit = config_path or env.get("AI_CONFIG")
    root = tool_root()
    path = Path(explicit) if explicit else default_config_path(root)
    if inputs is not None:
        inputs.note_conf(str(path))
        warn = inputs.watching(warn)
    values = _conf_values(path, bool(explicit), warn)
    values.update({k: v for k, v in env.items() if k.startswith("AI_") and k != "AI_CONFIG"})

    fields = {name.upper(): name for name in Settings._fields}
    _warn_unknown_keys(values, fields, path, env, warn)
    repo_raw = values.get("AI_REPO_ROOT", "").strip()
    repo_root = _resolved(os.path.expanduser(repo_raw), inputs) if repo_raw else root
    kwargs: dict[str, object] = {"ai_repo_root": repo_root}
    for key, raw in values.items():
        name = fields.get(key)
        if name is None or key in ("AI_REPO_ROOT", "AI_CONFIG"):
            continue
        if name in _FACTORIES and not raw.strip():
            continue  # empty: the documented default (~/.local/share/varaverk...), not base
        kwargs[name] = _convert(_field_type(name), key, raw, repo_root)
    kwargs["ai_config"] = path.resolve()
    settings = Settings(**kwargs)
    if settings.ai_embed_backend not in EMBED_BACKENDS:
        raise ConfigError(f"AI_EMBED_BACKEND: expected one of {', '.join(EMBED_BACKENDS)}, "
                          f"got {settings.ai_embed_backend!r}")
    if any(not pattern.strip("*?") for pattern in settings.ai_conf_read_keys):
        raise ConfigError("AI_CONF_READ_KEYS: a pattern matching every key (such as '*') would "
                          "let conf lookup read the whole conf; name keys or prefixes (MIRROR_*)")
    # Here, not at the top: ai-index --help loads this module but never reads settings.
    from varaverk.named_sources import parse_sources
    try:
        parse_sources(settings.ai_sources)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if settings.ai_gen_backend not in GEN_BACKENDS:
        raise ConfigError(f"AI_GEN_BACKEND: expected one of {', '.join(GEN_BACKENDS)}, "
                          f"got {settings.ai_gen_backend!r}")
    check_choice("AI_SUMMARIES", settings.ai_summaries, SUMMARY_MODES)
    if settings.ai_memory_digest not in MEMORY_DIGESTS:
        raise ConfigError(f"AI_MEMORY_DIGEST: expected one of {', '.join(MEMORY_DIGESTS)}, "
                          f"got {settings.ai_memory_digest!r}")
    check_embed_model(settings.ai_embed_backend, settings.ai_embed_model)
    check_ranges(settings)
    return settings


def _resolved(raw: str, inputs: config_inputs.Inputs | None) -> Path:
    """``raw`` with every symbolic link resolved; noted in ``inputs`` (when given) as the very
    value used, so that a link changed meanwhile cannot pass for the one read."""
    return Path(inputs.note("realpath", raw)) if inputs is not None else Path(raw).resolve()


def _conf_values(path: Path, explicit: bool, warn: Callable[[str], None]) -> dict[str, str]:
    """The ``AI_*`` keys of the conf file at ``path`` ({} when there is none and it was not
    named ``explicit``ly); ConfigError when a named one is missing or one cannot be read."""
    if explicit and not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    if not path.is_file():
        return {}
    # Imported only when there is a file to parse: start-up time of every command.
    from dotenv import dotenv_values
    try:
        parsed = dotenv_values(path, interpolate=False)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    from_file = {k: v for k, v in parsed.items() if k.startswith("AI_") and v is not None}
    _warn_shell_variables(from_file, path, warn)
    return from_file


def check_choice(key: str, value: str, choices: tuple[str, ...]) -> None:
    """Raise ConfigError naming ``key`` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ConfigError(f"{key}: expected one of {', '.join(choices)}, got {value!r}")


def check_ranges(settings: Settings) -> None:
    """Raise ConfigError for the first numeric setting outside ``RANGES``, naming the key and
    the allowed range (``AI_TOP_K: must be between 1 and 1000, got 0``)."""
    for name, (low, high) in RANGES.items():
        value = getattr(settings, name)
        if not low <= value <= high:
            raise ConfigError(f"{name.upper()}: must be between {low:g} and {high:g}, "
                              f"got {value:g}")


def _warn_unknown_keys(values: Mapping[str, str], fields: Mapping, path: Path,
                       env: Mapping[str, str], warn: Callable[[str], None]) -> None:
    """Warn about AI_* keys that are no setting, with the nearest known name."""
    unknown = sorted(set(values) - set(fields) - OTHER_KNOWN_KEYS)
    if not unknown:
        return
    import difflib  # only when there is something to suggest: start-up time of every command

    known = list(fields)
    for key in unknown:
        nearest = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
        hint = f"; did you mean {nearest[0]}?" if nearest else ""
        source = "the environment" if key in env else path
        warn(f"{key} (in {source}) is not a Varaverk setting and is ignored{hint}")


def _warn_shell_variables(values: Mapping[str, str], path: Path,
                          warn: Callable[[str], None]) -> None:
    """Warn about conf values written as if a shell expanded them (``$HOME/data``)."""
    for key, raw in sorted(values.items()):
        found = re.search(_SHELL_VARIABLE, raw)
        if found:
            warn(f"{key} in {path} holds {found.group(0)}, which is kept literally (the conf "
                 "is not run by a shell, so nothing in it is expanded): write the value out "
                 "in full")


def load_settings_or_report(program: str, config_path: str | os.PathLike | None = None
                            ) -> Settings | None:
    """``load_settings`` for an entry point: the one place a bad configuration is reported.

    Returns the Settings, or None after printing ``<program>: configuration error: <reason>``
    on stderr; the caller then exits with ``exitcodes.CONFIG``.
    """
    try:
        return load_settings(config_path)
    except ConfigError as exc:
        print(f"{program}: {exc.one_line()}", file=sys.stderr)
        return None
