# Varaverk :: Deployment/gunicorn.conf.py
# gunicorn settings for the dock; ai-dock runs: gunicorn --config THIS 'varaverk_dock.app:create_app()'
#
# PURPOSE
#   The dock streams answers that take seconds to minutes while the process mostly waits on
#   the model server. This file tells gunicorn how to serve that: where to listen, how many
#   processes and threads, how long a stream may stay open, and what the access log shows.
#
# OPERATIONAL MODEL
#   gunicorn executes this file once in the master process. It reads the same configuration
#   as every other Varaverk entry point (AI_CONFIG or Configurations/master.conf, then the
#   environment), so AI_DOCK_BIND and AI_DOCK_WORKERS apply whether the dock was started by
#   ai-dock, by systemd or by hand. Each forked worker sets up logging to AI_LOG_DIR/ai-dock.log
#   and builds its own application, retriever and chat client (no preloading: those hold
#   sockets and caches that must not be shared across a fork).
#
# DESIGN PRINCIPLES
#   Threaded Workers
#     The gthread worker keeps many slow streams open on few processes; AI_DOCK_MAX_STREAMS
#     (24) threads a worker for attached answer streams plus 8 for the rest of the page. An
#     answer itself runs in a thread of its own, attached or not. Every thread of a process
#     shares that process's one copy of the index's vector matrix.
#   Same Checks As The Application
#     The listening address is validated here with the dock's own check, so starting gunicorn
#     directly on a network address without AI_DOCK_TOKEN fails before a socket opens.
#   The Addresses gunicorn Really Binds
#     gunicorn's own --bind and GUNICORN_CMD_ARGS override the bind set here, so the rule is
#     checked again on what gunicorn will use (on_starting, before any socket opens) and on the
#     sockets it holds (when_ready, before any worker is forked; this covers sockets handed
#     over by systemd or a re-exec). Either refusal exits 78 with the address named.
#
# OPERATIONAL SAFEGUARDS
#   No Query Strings In The Access Log
#     The access log format uses the path without its query string (%(U)s), so a token
#     passed once in a URL to log in is never written to a log.
#   Graceful Stop
#     SIGTERM gives open streams graceful_timeout (30 s) to finish before workers are killed.
#     A worker that exits ends the answers it still generates with an error event (pages say
#     so at once); a killed one loses only its open turns, which the turn log closes once
#     their heartbeat is stale. Conversations are saved atomically after a turn completes, so
#     stored files stay readable.
#   Worker Heartbeat
#     timeout (120 s) only bounds a stuck worker's heartbeat; in threaded workers the
#     heartbeat keeps running while a stream is open, so long answers are not cut off.
#
# CONFIGURATION
#   AI_DOCK_BIND
#     host:port to listen on (default 127.0.0.1:8470); non-loopback requires AI_DOCK_TOKEN.
#   AI_DOCK_WORKERS
#     Worker processes (default 2).
#   AI_DOCK_MAX_STREAMS
#     Attached answer streams per worker (default 24); each worker runs this many threads
#     plus 8.
#   AI_CONFIG
#     The conf file to read (ai-dock sets it from --config).
#   GUNICORN_CMD_ARGS
#     gunicorn's own override for one run, e.g. GUNICORN_CMD_ARGS="--threads 8". A --bind
#     there is held to the same rule as AI_DOCK_BIND (non-loopback requires AI_DOCK_TOKEN).
#
# RUNTIME MODES
#   Under ai-dock
#     The normal way: ai-dock validates the configuration, then execs gunicorn with this file.
#   Under systemd
#     Deployment/varaverk-dock.service runs ai-dock; gunicorn notifies systemd when ready.
#   By hand
#     python -m gunicorn --config Deployment/gunicorn.conf.py 'varaverk_dock.app:create_app()'

import sys

from varaverk.config import ConfigError, load_settings
from varaverk.exitcodes import CONFIG
from varaverk_dock.security import check_bind, check_listeners, dock_url

_settings = load_settings()
check_bind(_settings.ai_dock_bind, _settings.ai_dock_token)

wsgi_app = "varaverk_dock.app:create_app()"
bind = [_settings.ai_dock_bind]
workers = max(1, _settings.ai_dock_workers)
worker_class = "gthread"
# Each attached event stream holds a thread (AI_DOCK_MAX_STREAMS); 8 more serve the page.
threads = _settings.ai_dock_max_streams + 8
timeout = 120
graceful_timeout = 30
keepalive = 5
preload_app = False
proc_name = "varaverk-dock"
accesslog = "-"
errorlog = "-"
access_log_format = '%(h)s "%(m)s %(U)s %(H)s" %(s)s %(B)s %(M)sms'
forwarded_allow_ips = "127.0.0.1,::1"


def on_starting(server):
    """Before any socket opens: the bind gunicorn settled on (after --bind and
    GUNICORN_CMD_ARGS) must obey the token rule, else exit 78."""
    try:
        check_listeners(server.cfg.bind, _settings.ai_dock_token)
    except ConfigError as exc:
        server.log.error("ai-dock: configuration error: %s", exc)
        sys.exit(CONFIG)


def when_ready(server):
    """Listening, no worker yet: the sockets really held (systemd's, a re-exec's) must obey
    the token rule, else stop before a request is served (exit 78); then say where to open."""
    held = [lnr.getsockname() for lnr in server.LISTENERS]
    try:
        check_listeners(held, _settings.ai_dock_token)
    except ConfigError as exc:
        server.log.error("ai-dock: configuration error: %s", exc)
        server.halt(str(exc), exit_status=CONFIG)
    for address in held:  # what --bind and GUNICORN_CMD_ARGS settled on, not the conf
        if isinstance(address, tuple):
            server.log.info("ai-dock: open %s", dock_url(str(address[0]), address[1]))


def worker_exit(server, worker):
    """A worker going away (restart, stop) ends the answers it still generates with an error
    event at once, so their pages say so instead of waiting for the stale-turn check."""
    app = getattr(worker, "wsgi", None)
    state = getattr(app, "extensions", {}).get("varaverk_dock")
    runner = getattr(state, "turn_runner", None)
    if runner is not None:
        ended = runner.interrupt_all("the dock process generating this answer was stopped "
                                     "(restart or shutdown); ask again")
        if ended:
            server.log.info("ai-dock: %d answer(s) interrupted by the worker's exit", ended)


def post_fork(server, worker):
    """Each worker logs to AI_LOG_DIR/ai-dock.log and stderr (journald under systemd)."""
    from varaverk.logs import setup_logging

    setup_logging(_settings, "ai-dock")
