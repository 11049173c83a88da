#!/usr/bin/env python3
# Varaverk :: Plugin/varaverk_dock/ai_dock.py (console script: ai-dock)
# Start the dock: Varaverk's chat page and API, served by gunicorn on AI_DOCK_BIND.
#
# PURPOSE
#   Most operators ask their questions from the web GUI, not from a shell. The dock is that
#   page: pick a profile, ask, watch the answer stream in with its sources, come back later to
#   the same conversation. This command is the one way to start it. In production it hands
#   over to gunicorn with Deployment/gunicorn.conf.py; with --dev it runs Flask's own server
#   for working on the page.
#
# OPERATIONAL MODEL
#   The command reads the configuration (Configurations/master.conf or --config, then the
#   environment), checks the listening address and then replaces itself with gunicorn
#   (exec), so a service manager supervises gunicorn directly and its signals reach it. The
#   gunicorn master forks AI_DOCK_WORKERS worker processes with a pool of threads each; every
#   worker builds the Flask application (varaverk_dock.app:create_app) and, on the first
#   question, one retriever and one chat client that it keeps for its lifetime. The page
#   posts a question to POST /api/turns, which starts the chat worker (varaverk.answering.answer)
#   in a thread of that worker process: it retrieves, builds the prompt for the profile,
#   streams from the model server and appends one ledger row with source webgui when the turn
#   completes. Every event goes to the turn log (AI_DATA_DIR/turns.sqlite); pages follow it as
#   Server-Sent Events from any worker, and the conversation is saved under
#   AI_DATA_DIR/ai_chats/ once the turn is done or stopped.
#
# DESIGN PRINCIPLES
#   One Retrieval Path
#     The dock never retrieves, prompts or generates itself. It calls the same worker that
#     ai-query uses, so an answer in the browser and an answer in the shell come from the same
#     code and the same profile definition (AI/varaverk/answering/profiles.py).
#   Threads For Streams
#     An answer streams for seconds to minutes while the process mostly waits on the model
#     server. gunicorn's threaded workers keep many streams open on few processes, and each
#     process keeps one copy of the index's vector matrix instead of one per stream.
#   A Turn Lives On The Server
#     A reload, a second tab or a dropped connection attaches to the same turn and replays it
#     from the event it last saw (Last-Event-ID); closing the tab does not stop it, Stop in
#     any tab stops it for all. No worker holds state another worker needs.
#   Saved When Done, Never Half
#     A conversation is written only after a turn completes, or, marked stopped, with the
#     partial answer when someone pressed Stop. An error from the model server or a killed
#     process leaves the stored conversation as it was.
#   Plain Page, No Internet
#     The page is server-rendered HTML with one small script and one stylesheet from the dock
#     itself; it works on a network with no route to the internet.
#
# OPERATIONAL SAFEGUARDS
#   Loopback Unless Told Otherwise
#     AI_DOCK_BIND defaults to 127.0.0.1:8470. Any other address requires AI_DOCK_TOKEN: the
#     command refuses to start without it (exit 78), and so does the application factory,
#     whatever server runs it.
#   Constant-Time Token
#     The token is compared with hmac.compare_digest, presented in the X-Varaverk-Token
#     header, as a bearer token, or through an HttpOnly SameSite=Strict cookie that the login
#     form (or one visit with ?token= in the URL) sets. The cookie holds a keyed hash, not the
#     token. The access log records paths without query strings, so a token in a URL never
#     reaches a log.
#   Same-Origin State Changes
#     Every request that changes state (ask, import, delete) must come from the dock's own
#     page, judged by Sec-Fetch-Site, else Origin, else Referer; anything else is refused
#     with 403, so another web site open in the same browser cannot post questions or delete
#     conversations.
#   DNS Rebinding Guard
#     On a loopback bind without a token, requests whose Host header is not a loopback name
#     are refused. Behind a reverse proxy, pass Host as 127.0.0.1:PORT or set AI_DOCK_TOKEN.
#   Validated Conversations
#     Every stored message is re-checked when it is read, from the browser and from disk:
#     role user or assistant, content a string within 32000 characters. A stored
#     conversation is replayed into later prompts, so an injected system role would otherwise
#     survive a reload. Chat ids are letters, digits, dash and underscore only, so no id can
#     name a path outside the chat folder.
#   Crash-Safe Chat Files
#     Each conversation is one JSON file written to a temporary file in the same folder,
#     flushed, fsynced and renamed over the old one. A corrupt file (truncated, empty, NUL
#     bytes) is renamed to NAME.json.corrupt-TIMESTAMP, reported once, and the list keeps
#     working.
#   Bounded Requests
#     Request bodies are capped at 1 MiB and every question at 32000 characters.
#   Safe Rendering
#     Model output and document text are rendered from Markdown with raw HTML disabled and
#     then sanitised with nh3; while an answer streams it is shown as plain text. A strict
#     Content-Security-Policy forbids inline scripts.
#
# CONFIGURATION
#   AI_ENABLED
#     Master switch. While false the dock still starts but shows a page saying Varaverk is
#     disabled on this host, and every /api route answers 503.
#   AI_DOCK_BIND
#     host:port to listen on (default 127.0.0.1:8470). --bind overrides it for one run.
#   AI_DOCK_TOKEN
#     Access token; required when AI_DOCK_BIND is not a loopback address. Never logged.
#   AI_DOCK_WORKERS
#     gunicorn worker processes (default 2).
#   AI_DOCK_MAX_TURNS, AI_DOCK_MAX_STREAMS, AI_DOCK_TURN_RETAIN_HOURS
#     Answers generated at once over all workers (8); attached event streams per worker (24,
#     each a gunicorn thread; 8 more threads serve the page); hours a finished turn's events
#     stay replayable (24).
#   AI_CHAT_HISTORY_MAX
#     Conversations kept under AI_DATA_DIR/ai_chats/ (default 10); after each save the oldest
#     by creation time are deleted.
#   AI_DATA_DIR, AI_LOG_DIR, AI_HOST_NAME
#     Where conversations and the ledger live, where ai-dock.log goes, and the host name that
#     ledger rows and new conversation file names carry.
#   AI_CONFIG
#     Path of the conf file when --config is not given; ai-dock passes --config on to
#     gunicorn's workers through it.
#
# RUNTIME MODES
#   ai-dock
#     Production: exec gunicorn with Deployment/gunicorn.conf.py on AI_DOCK_BIND. Stop with
#     SIGTERM (graceful, 30 s for open streams), reload workers with SIGHUP.
#   ai-dock --dev
#     Flask's development server, threaded, on the same address; for working on the page.
#   ai-dock --check
#     Validate the configuration and the listening address (well formed, allowed without a
#     token, and free to listen on), print the URL and exit 0 (or 78).
#   Exit codes
#     0 stopped cleanly or --check passed; 1 unexpected failure; 2 bad command line;
#     78 configuration error (including a non-loopback bind without AI_DOCK_TOKEN, and an
#     address another program already listens on); 130 Ctrl-C.
#   Deployment
#     Deployment/varaverk-dock.service is a systemd unit template for this command.
"""Entry point of the dock (``ai-dock``): checks the configuration, then runs gunicorn."""

from __future__ import annotations

import argparse
import errno
import logging
import os
import socket
import sys
from pathlib import Path

from varaverk import cli
from varaverk import exitcodes
from varaverk.cli import HelpFormatter
from varaverk.config import ConfigError, add_config_option, load_settings
from varaverk.logs import RedactSecrets, setup_logging
from varaverk_dock.security import check_bind, dock_url, parse_bind

APP_SPEC = "varaverk_dock.app:create_app()"
GUNICORN_CONF = Path(__file__).resolve().parents[2] / "Deployment" / "gunicorn.conf.py"


def gunicorn_command(conf: Path = GUNICORN_CONF) -> list[str]:
    """The argv that runs gunicorn for the dock with the project's gunicorn configuration."""
    return [sys.executable, "-m", "gunicorn", "--config", str(conf), APP_SPEC]


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="ai-dock", description="Serve Varaverk's chat page and API (gunicorn).",
        formatter_class=HelpFormatter,
        epilog=exitcodes.epilog(exitcodes.OK, exitcodes.FAILURE, exitcodes.USAGE,
                                exitcodes.CONFIG, exitcodes.INTERRUPTED))
    add_config_option(parser)
    parser.add_argument("--bind", help="host:port for this run (overrides AI_DOCK_BIND)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--dev", action="store_true", help="run Flask's development server")
    mode.add_argument("--check", action="store_true",
                      help="validate the configuration and the address, then exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return parser.parse_args(argv)


def check_port_free(host: str, port: int) -> None:
    """Raise ConfigError naming AI_DOCK_BIND when ``host:port`` cannot be bound (another
    program listens there, or the address is not this host's). Binds and closes at once, with
    SO_REUSEADDR as gunicorn does, so a socket still in TIME_WAIT does not count as taken."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
    except OSError as exc:
        why = ("already in use (another dock or program listens there)"
               if getattr(exc, "errno", None) == errno.EADDRINUSE else f"not usable: {exc}")
        raise ConfigError(f"AI_DOCK_BIND: {host}:{port} is {why}; stop that program or choose "
                          f"another address with AI_DOCK_BIND or --bind") from None


def main(argv: list[str] | None = None) -> int:
    """Run the dock; returns an exit code from ``varaverk.exitcodes`` (gunicorn replaces this
    process in production, so that path only returns on failure)."""
    return cli.run("ai-dock", _main, argv)


def _gunicorn_binds_itself() -> bool:
    """Whether gunicorn's own arguments (``GUNICORN_CMD_ARGS``) set the address, read by
    gunicorn's own parser; arguments it cannot parse are left for gunicorn to report."""
    from gunicorn.config import Config  # only to start gunicorn

    cfg = Config()
    try:
        return bool(cfg.parser().parse_args(cfg.get_cmd_args_from_env()).bind)
    except SystemExit:
        return False


def _main(argv: list[str] | None) -> int:
    args = _parse_args(argv)
    settings = load_settings(args.config)
    if args.bind:
        settings = settings.replace(ai_dock_bind=args.bind)
    check_bind(settings.ai_dock_bind, settings.ai_dock_token)
    host, port = parse_bind(settings.ai_dock_bind)
    check_port_free(host, port)
    log = setup_logging(settings, "ai-dock", verbose=args.verbose, to_file=not args.check)
    url = dock_url(host, port)
    if not settings.ai_enabled:
        log.warning("AI_ENABLED=false: the dock serves only the 'disabled' page")
    if args.check:
        print(f"ai-dock: configuration ok; would listen on {url}")
        return exitcodes.OK
    if args.dev:
        from varaverk_dock.app import create_app  # Flask: gunicorn's workers import it themselves

        # Flask's server logs whole request lines: a token given once in a URL is masked.
        logging.getLogger("werkzeug").addFilter(RedactSecrets([settings.ai_dock_token]))
        log.info("development server on %s", url)
        create_app(settings).run(host=host, port=port, threaded=True, debug=False,
                                 use_reloader=False)
        return exitcodes.OK
    if not GUNICORN_CONF.is_file():
        log.error("gunicorn configuration not found: %s", GUNICORN_CONF)
        return exitcodes.CONFIG
    # gunicorn's workers read the same configuration: pass --config and --bind on by name.
    if args.config:
        os.environ["AI_CONFIG"] = str(Path(args.config).resolve())
    os.environ["AI_DOCK_BIND"] = settings.ai_dock_bind
    if _gunicorn_binds_itself():
        log.info("starting gunicorn; GUNICORN_CMD_ARGS sets the address it listens on")
    else:
        log.info("starting gunicorn on %s", url)
    command = gunicorn_command()
    try:
        os.execv(command[0], command)
    except OSError as exc:
        log.error("cannot start gunicorn: %s", exc)
        return exitcodes.FAILURE
    return exitcodes.FAILURE  # not reached: execv does not return


if __name__ == "__main__":
    sys.exit(main())
