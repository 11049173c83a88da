#!/usr/bin/env python3
# Varaverk :: Tools/varaverk_tools/git_pull_execute.py (console script: git-pull-execute)
# Pull the homelab repository and re-index its documentation when the pull changed something.
#
# PURPOSE
#   The index must follow the repository without anyone remembering to rebuild it. This job
#   is the daily pull of the homelab repository (AI_REPO_ROOT) with a re-index hook: after a
#   pull that brought new commits touching tracked files, it runs ai-index so that ai-query
#   and the dock answer from the documentation as it now is.
#
# OPERATIONAL MODEL
#   The job takes its lock, records HEAD, and runs a fast-forward-only git pull through
#   GitPython on the checked-out branch and its upstream. It then records HEAD again and asks
#   git for the names of the files changed between the two commits. Three gates decide whether
#   the index is refreshed, in this order: the pull succeeded and changed tracked files;
#   AI_INDEX_ON_PULL is true; AI_ENABLED is true. When all three pass, ai-index runs as a
#   child process (python -m varaverk_tools.ai_index, with the same --config), which takes the index
#   lock, logs to its own log file and only re-embeds the files that changed. Every gate that
#   stops the re-index is logged by name. A systemd timer
#   (Deployment/varaverk-git-pull.timer) or the cron line in Deployment/varaverk.cron runs the
#   job once a day.
#
# DESIGN PRINCIPLES
#   The Pull Is The Job, The Index Is A Passenger
#     The pull runs whatever the AI settings say; only the re-index is gated. A homelab that
#     turns Varaverk off still gets its daily pull.
#   Never Fatal For The Pull
#     A failed re-index leaves the previous index in place (ai-index replaces nothing it could
#     not rebuild) and the job still reports the pull as a success with exit code 0. A stale
#     index that answers is better than a pull job that alarms every night over an embedding
#     server that is down.
#   One Home For Indexing
#     The re-index is ai-index itself, run as a child process, so its lock, its log, its
#     incremental plan and its exit codes stay in one place instead of being re-implemented.
#   Fast-Forward Only
#     An unattended pull never creates a merge commit and never rewrites local work. A
#     diverged branch makes the pull fail loudly instead.
#
# OPERATIONAL SAFEGUARDS
#   Single Instance Lock
#     The job holds a file lock (AI_DATA_DIR/git-pull-execute.lock) for its whole run; a second
#     start exits at once with code 75 instead of racing git's own index.lock.
#   Changed Files Gate
#     The re-index runs only when HEAD moved and the diff between the old and new HEAD names at
#     least one tracked file. A pull that fetched nothing, or only moved other branches, costs
#     no indexing at all.
#   No Password Prompt
#     git runs with GIT_TERMINAL_PROMPT=0 and a time limit, so a remote that suddenly wants
#     credentials fails the pull instead of hanging the timer forever.
#   Index Failure Containment
#     A non-zero exit of ai-index (model server down, lock held by a manual run, mismatch) is
#     logged as a warning with its exit code; the job's own exit code stays 0.
#   Detached Or Untracked Branch
#     A detached HEAD or a branch without an upstream is reported as a failed pull (exit 1)
#     with the reason, never guessed at.
#
# CONFIGURATION
#   AI_REPO_ROOT
#     The git work tree to pull (default: the repository Varaverk runs from).
#   AI_INDEX_ON_PULL
#     Re-index after a pull that changed tracked files (default false).
#   AI_ENABLED
#     Master switch; while false the pull still runs and the re-index is skipped.
#   AI_DATA_DIR
#     Holds the job's lock file beside the index.
#   AI_LOG_DIR
#     The job's log file, git-pull-execute.log (ai-index writes its own ai-index.log).
#
# RUNTIME MODES
#   Default
#     git-pull-execute: pull, then re-index behind the three gates.
#   No Index
#     git-pull-execute --no-index: pull only, as if AI_INDEX_ON_PULL were false.
#   Quiet
#     git-pull-execute --quiet: only warnings and errors on stderr, for cron; the log file
#     under AI_LOG_DIR still gets every line.
#   Exit Codes
#     0 the pull succeeded (whether or not the re-index ran or succeeded), 1 the pull failed,
#     2 bad command line, 75 another run holds the lock, 78 invalid configuration.
"""Pull AI_REPO_ROOT and re-index behind three gates (see the header above)."""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import filelock
import git

from varaverk import cli
from varaverk import exitcodes
from varaverk.cli import HelpFormatter
from varaverk.config import Settings, add_config_option, load_settings
from varaverk.logs import setup_logging

PROG = "git-pull-execute"
LOCK_NAME = "git-pull-execute.lock"
PULL_TIMEOUT = 600  # seconds before a hung git pull is killed

log = logging.getLogger("varaverk.git_pull_execute")


@dataclass
class PullResult:
    """What the pull did.

    Attributes:
        ok: the pull succeeded.
        before, after: HEAD before and after (hex sha; None when unknown).
        changed: tracked paths changed between ``before`` and ``after``.
        message: a one-line description for the log.
    """

    ok: bool
    before: str | None = None
    after: str | None = None
    changed: list[str] = field(default_factory=list)
    message: str = ""


@dataclass
class RunResult:
    """The whole run: the pull, whether the index ran, and the gate that stopped it if not."""

    pull: PullResult
    indexed: bool = False
    index_exit: int | None = None
    skipped_by: str | None = None


def pull(repo_root: Path) -> PullResult:
    """Fast-forward the checked-out branch of ``repo_root`` from its upstream.

    Never raises for git failures: they come back as ``PullResult(ok=False, message=...)``.
    """
    try:
        repo = git.Repo(repo_root)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
        return PullResult(False, message=f"{repo_root} is not a git work tree ({exc})")
    with repo:
        if repo.head.is_detached:
            return PullResult(False, message=f"{repo_root}: detached HEAD, nothing to pull onto")
        branch = repo.active_branch
        if branch.tracking_branch() is None:
            return PullResult(False, message=f"{repo_root}: branch {branch.name} has no "
                                             "upstream to pull from")
        try:
            before = repo.head.commit.hexsha
        except ValueError:  # an empty repository has no commit yet
            before = None
        try:
            with repo.git.custom_environment(GIT_TERMINAL_PROMPT="0"):
                repo.git.pull("--ff-only", "--quiet", kill_after_timeout=PULL_TIMEOUT)
        except git.GitCommandError as exc:
            detail = (exc.stderr or str(exc)).strip().replace("\n", " ")
            return PullResult(False, before=before, message=f"git pull failed: {detail}")
        after = repo.head.commit.hexsha
        changed: list[str] = []
        if before is None:
            changed = [p for p in repo.git.ls_files("-z").split("\0") if p]
        elif after != before:
            out = repo.git.diff("--name-only", "-z", before, after)
            changed = [p for p in out.split("\0") if p]
    if after == before:
        message = f"already up to date at {after[:12]}"
    else:
        message = f"{(before or 'nothing')[:12]} -> {after[:12]}, {len(changed)} file(s) changed"
    return PullResult(True, before=before, after=after, changed=changed, message=message)


def index_gate(settings: Settings, result: PullResult, no_index: bool = False) -> str | None:
    """The first gate that stops the re-index, or None when all three pass."""
    if not result.ok:
        return "the pull failed"
    if not result.changed:
        return "the pull changed no tracked file"
    if no_index or not settings.ai_index_on_pull:
        return "AI_INDEX_ON_PULL=false" + (" (--no-index)" if no_index else "")
    if not settings.ai_enabled:
        return "AI_ENABLED=false"
    return None


def index_command(config_path: str | None) -> list[str]:
    """ai-index as a child process of this interpreter, with the same ``--config``."""
    argv = [sys.executable, "-m", "varaverk_tools.ai_index"]
    if config_path:
        argv += ["--config", str(config_path)]
    return argv


def run_index(config_path: str | None) -> int:
    """Run ai-index (its own lock and log); returns its exit code."""
    completed = subprocess.run(index_command(config_path), check=False,
                               stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if completed.returncode != 0:
        tail = (completed.stderr or completed.stdout).strip().splitlines()[-3:]
        if tail:
            log.warning("ai-index said: %s", " | ".join(tail))
    return completed.returncode


def pull_and_index(settings: Settings, *, config_path: str | None = None, no_index: bool = False,
                   indexer: Callable[[str | None], int] = run_index) -> RunResult:
    """Pull, then re-index behind the three gates; never raises for an index failure.

    Args:
        settings: ``AI_REPO_ROOT``, ``AI_INDEX_ON_PULL``, ``AI_ENABLED``.
        config_path: passed on to ai-index as ``--config``.
        no_index: skip the re-index (as ``AI_INDEX_ON_PULL=false``).
        indexer: runs the index and returns its exit code (default: ai-index as a child
            process); tests inject their own.
    """
    result = pull(settings.ai_repo_root)
    if result.ok:
        log.info("pulled %s: %s", settings.ai_repo_root, result.message)
    else:
        log.error("pull of %s failed: %s", settings.ai_repo_root, result.message)
    run = RunResult(pull=result)
    run.skipped_by = index_gate(settings, result, no_index)
    if run.skipped_by:
        log.info("re-index skipped: %s", run.skipped_by)
        return run
    log.info("re-indexing after %d changed file(s)", len(result.changed))
    try:
        code = indexer(config_path)
    except Exception:  # noqa: BLE001 - never fatal: the pull already succeeded
        log.warning("re-index failed to run; the previous index stays in place", exc_info=True)
        code = exitcodes.FAILURE
    run.index_exit = code
    run.indexed = code == exitcodes.OK
    if run.indexed:
        log.info("re-index done")
    else:
        log.warning("re-index failed with exit code %d; the previous index stays in place and "
                    "the pull still counts as done", code)
    return run


def build_parser() -> argparse.ArgumentParser:
    """The command line (see RUNTIME MODES in the header)."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="git pull --ff-only of AI_REPO_ROOT, then ai-index when the pull "
        "changed tracked files, AI_INDEX_ON_PULL=true and AI_ENABLED=true.",
        formatter_class=HelpFormatter,
        epilog=exitcodes.epilog(exitcodes.OK, exitcodes.FAILURE, exitcodes.USAGE,
                                exitcodes.LOCKED, exitcodes.CONFIG, exitcodes.INTERRUPTED))
    add_config_option(parser)
    parser.add_argument("--no-index", action="store_true", help="pull only, never re-index")
    noise = parser.add_mutually_exclusive_group()
    noise.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    noise.add_argument("-q", "--quiet", action="store_true",
                       help="only warnings and errors on stderr (cron mails only those)")
    return parser


def main(argv: list[str] | None = None, *,
         indexer: Callable[[str | None], int] = run_index) -> int:
    """Entry point; returns an exit code from varaverk.exitcodes."""
    return cli.run(PROG, lambda args: _main(args, indexer), argv)


def _main(argv: list[str] | None, indexer: Callable[[str | None], int]) -> int:
    args = build_parser().parse_args(argv)
    settings = load_settings(args.config)
    setup_logging(settings, PROG, verbose=args.verbose, quiet=args.quiet)
    lock_path = settings.ai_data_dir / LOCK_NAME
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with filelock.FileLock(str(lock_path), timeout=0):
            run = pull_and_index(settings, config_path=args.config or os.environ.get("AI_CONFIG"),
                                 no_index=args.no_index, indexer=indexer)
    except filelock.Timeout:
        log.warning("another %s run holds %s; exiting", PROG, lock_path)
        return exitcodes.LOCKED
    return exitcodes.OK if run.pull.ok else exitcodes.FAILURE


if __name__ == "__main__":
    sys.exit(main())
