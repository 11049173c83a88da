"""Destructive-shell scanner: finds commands that can wipe data, disks or a host.

Used by the ``code`` profile on every answer it drafts (each finding is shown beside the
snippet) and by operators through ``ai-scan-shell``. ``scan(text)`` accepts plain shell or a
whole Markdown answer, in which case every ```bash/sh/shell/zsh/console or untagged fenced
block (and indented code block) is scanned and findings carry the answer's line numbers.

How a snippet is read (one module per step):
  1. ``lexer``: a quote-aware lexer splits the text into tokens; ``commands`` groups them into
     logical units (one command line, with backslash continuations, trailing ``|``/``&&``/``||``
     and here-document bodies joined in). Comments and quoted text are data, never commands,
     so ``echo "rm -rf /"`` and ``# rm -rf /`` are benign.
  2. ``commands``: each unit is parsed with bashlex, which yields real command words,
     redirections, pipelines and nested ``$(...)``/``<(...)`` substitutions. bashlex rejects
     plenty of real syntax (``[[ ]]``, ``case``, arithmetic, arrays), so when it fails the
     lexer's own tokens are grouped into pipelines and commands instead: the scan never gives
     up on a unit.
  3. ``scanner``: each command (after ``sudo``/``env``/``nohup``/... prefixes) goes through
     the ``rules``, one per command name; strings run by ``bash -c``, ``ssh host CMD``,
     ``eval``, ``echo ... | sh`` and here-documents fed to a shell are scanned recursively.
  4. ``report``: each finding is kept once, with its line, reason, snippet and rule id;
     ``markdown`` finds the shell blocks of an answer.

Variables (``paths``): literal assignments earlier in the text are substituted
(``DIR=/mnt/user`` then ``rm -rf "$DIR"`` is a finding); ``${DIR:?}``, ``${DIR:-x}`` and an
earlier ``: "${DIR:?}"`` count as guards. A recursive delete whose path collapses onto a root
when an unguarded variable is empty (``rm -rf "$DIR/"*`` becomes ``rm -rf /*``) is a finding,
and so is any unquoted variable as a recursive-delete target.

The scanner errs towards a finding: a false alarm costs a glance, a miss can cost an array.
"""

from __future__ import annotations

from .markdown import SHELL_FENCE_LANGUAGES, extract_shell_blocks, has_fence
from .report import Finding, by_line
from .scanner import Scanner

__all__ = ["Finding", "scan", "scan_shell", "extract_shell_blocks", "SHELL_FENCE_LANGUAGES"]


def scan_shell(code: str, first_line: int = 1) -> list[Finding]:
    """Findings for plain shell ``code``; line numbers start at ``first_line``."""
    scanner = Scanner()

    def line_of(offset: int) -> int:
        return first_line + code.count("\n", 0, offset)

    scanner.scan_text(code, line_of)
    return by_line(scanner.report.findings)


def scan(text: str, markdown: bool | None = None) -> list[Finding]:
    """Destructive commands in ``text``, sorted by line.

    Args:
        text: plain shell, or a Markdown answer holding fenced code blocks.
        markdown: True scans only the answer's shell code blocks (use this for model answers:
            prose is never read as commands); False scans the whole text as shell; None
            (default) treats the text as Markdown when it holds a fence, else as shell.

    Returns:
        ``[Finding(line, reason, snippet, rule)]``; line numbers are lines of ``text``.
    """
    if markdown is None:
        markdown = has_fence(text)
    if not markdown:
        return scan_shell(text)
    findings: list[Finding] = []
    for first, code in extract_shell_blocks(text):
        findings.extend(scan_shell(code, first))
    return by_line(findings)
