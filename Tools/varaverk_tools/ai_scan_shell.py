#!/usr/bin/env python3
# Varaverk :: Tools/varaverk_tools/ai_scan_shell.py
# Scan a shell script or a Markdown answer for destructive commands before anyone runs it.
#
# PURPOSE
#   ai-scan-shell is the operator's door to the same scanner that checks every shell snippet
#   the code profile drafts. Give it a script, a Markdown file (a saved answer, a README) or
#   standard input, and it prints each command that could wipe data, disks or the host, with
#   its line and the reason: recursive deletes of /, of a home or array root or of a variable
#   that may be empty, dd or redirection onto a block device, mkfs, wipefs and sgdisk --zap,
#   recursive chmod/chown on system paths, curl piped into a shell, fork bombs, git reset
#   --hard and git clean -fdx, docker volume pruning, zpool/zfs/btrfs destroys, shutdown and
#   reboot, and the like. It exits 1 when it found anything, so it can gate a cron wrapper,
#   a pre-commit hook or a "paste this into the terminal" habit.
#
# OPERATIONAL MODEL
#   The input is read whole (a file path, or "-" for standard input) and decoded as UTF-8
#   with undecodable bytes replaced. A file ending in .md or .markdown, or any text holding a
#   ``` or ~~~ fence, is treated as Markdown: only its shell code blocks (bash, sh, shell,
#   zsh, console, untagged, indented) are scanned, and line numbers are the file's own.
#   Anything else is scanned as one shell script. Each finding prints as
#   "PATH:LINE: reason" followed by the offending line indented; --json prints one JSON
#   array instead. The scan itself lives in varaverk.answering.shell_scan (AI/varaverk/answering/shell_scan/).
#
# DESIGN PRINCIPLES
#   Parse, Do Not Grep
#     The shell is parsed with bashlex, falling back to a quote-aware tokenizer where bashlex
#     does not know the syntax, so a comment or a quoted string that mentions rm -rf / is
#     not a finding, while bash -c "rm -rf /", ssh host 'rm -rf ...', eval and here-documents
#     fed to a shell are scanned as the commands they are.
#   Err Towards A Finding
#     A false alarm costs the reader a glance; a missed rm -rf "$DIR/"* costs an array. Where
#     the scanner cannot tell (a variable with no guard, a download piped into a shell), it
#     reports and says why.
#   One Scanner For Answers And Operators
#     The dock, the worker and this command share one module, so what an operator sees here
#     is exactly what the code profile shows beside a drafted snippet.
#
# OPERATIONAL SAFEGUARDS
#   Never Executes Anything
#     The input is only read and parsed. Nothing is run, sourced or expanded, whatever the
#     script contains, so scanning a hostile script is safe.
#   Works Without The AI
#     The scan needs no model server, no index and no configuration; it runs even with
#     AI_ENABLED=false, because it contacts nothing and writes nothing.
#   Clear Exit Codes
#     0 means nothing destructive was found, 1 means at least one finding, 2 a usage error
#     (no such file, unreadable input, bad options), so a wrapper can tell "dangerous" from
#     "could not check".
#
# CONFIGURATION
#   No Settings
#     ai-scan-shell reads no AI_* key and no conf file; its behaviour is fixed by its
#     command line alone.
#   Rules
#     The rules and the roots they protect (/, /home/*, /mnt/user and its shares,
#     /mnt/disk*, /boot, /etc, /usr, /var...) live in AI/varaverk/answering/shell_scan/rules.py and
#     AI/varaverk/answering/shell_scan/paths.py; each finding names its rule id (rm-root, dd-device,
#     curl-pipe-shell...) in --json output.
#
# RUNTIME MODES
#   ai-scan-shell FILE
#     Scan one file; Markdown or shell is decided from the name and content.
#   ai-scan-shell - (or no argument)
#     Scan standard input, e.g. `xclip -o | ai-scan-shell -`.
#   --markdown / --shell
#     Force the input to be read as a Markdown answer or as a plain shell script.
#   --json
#     Print the findings as a JSON array of {"line", "reason", "snippet", "rule"}.

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from varaverk import cli
from varaverk import exitcodes
from varaverk.cli import HelpFormatter
from varaverk.answering.shell_scan import scan


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ai-scan-shell",
        formatter_class=HelpFormatter,
        description="Report destructive commands in a shell script or a Markdown answer.",
        epilog="exit codes:\n  0   nothing destructive found\n"
               "  1   a destructive operation was found (also: an unexpected failure)\n"
               "  2   bad command line, or the file cannot be read\n")
    p.add_argument("file", nargs="?", default="-", help="a file to scan, or - for standard input (the default)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--markdown", action="store_true", help="scan only the shell code blocks")
    mode.add_argument("--shell", action="store_true", help="scan the whole input as shell (default: Markdown when the input has a "
                           "``` or ~~~ fence, else shell)")
    p.add_argument("--json", action="store_true", help="print findings as a JSON array")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the scanner on a file or standard input; returns the exit code (0, 1 or 2)."""
    return cli.run("ai-scan-shell", _main, argv)


def _main(argv: list[str] | None) -> int:
    args = _parser().parse_args(argv)
    if args.file == "-":
        name = "<stdin>"
        data = sys.stdin.buffer.read()
    else:
        name = args.file
        try:
            data = Path(args.file).read_bytes()
        except OSError as exc:
            print(f"ai-scan-shell: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
            return exitcodes.USAGE
    text = data.decode("utf-8", errors="replace")
    if args.markdown:
        markdown: bool | None = True
    elif args.shell:
        markdown = False
    elif name.lower().endswith((".md", ".markdown")):
        markdown = True
    else:
        markdown = None  # Markdown if it holds a fence, else shell
    findings = scan(text, markdown=markdown)
    if args.json:
        print(json.dumps([f.to_dict() for f in findings], indent=2))
    else:
        for f in findings:
            print(f"{name}:{f.line}: {f.reason}")
            print(f"    {f.snippet}")
    return exitcodes.FINDINGS if findings else exitcodes.OK


if __name__ == "__main__":
    sys.exit(main())
