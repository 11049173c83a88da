"""Machine annotations: comments written for a tool, never for a reader.

Homelab repositories carry them in every format: Renovate's regex-manager markers above an
image tag (``# renovate: datasource=docker depName=...``), editor schema hints
(``# yaml-language-server: $schema=...``), Flux image-policy markers, Helm schema plugins
(``# @schema`` blocks), linter switches (``# shellcheck disable=...``, ``# noqa``,
``# type: ignore``, ``# pylint: disable=...``, ``# yamllint disable``, ``# prettier-ignore``),
encoding cookies and editor modelines, Ansible and Jinja headers, cloud-init's
``#cloud-config``, and a second ``#!`` line. Indexed, they become chunks titled after the key
below them (``image``, ``version``) that say nothing and crowd out the ones that do.

``is_annotation(body)`` judges one comment's text with its leader (``#``, ``//``, ``;``)
already removed; ``annotation_lines(lines)`` gives the 0-based numbers of the whole
comment lines of a file that are annotations, the lines between a pair of ``# @schema``
markers and those of an Emacs ``Local Variables:`` block included;
``strip_trailing_annotation`` removes one written after a value on the same line;
``is_markdown_marker`` judges the text of a Markdown HTML comment (``<!-- toc -->``). Every
chunker drops these lines before it looks for comments, so a key whose comment block holds
nothing but annotations is documented by nothing. Helm-docs descriptions (``# -- text``) and
Bitnami's ``## @param key text`` are prose and stay.
"""

from __future__ import annotations

import re

# One alternative per tool; each must match the start of the comment's text (leader gone,
# leading blanks stripped). Case-insensitive.
_DIRECTIVES = (
    r"renovate\s*:", r"renovate-ignore\b", r"yaml-language-server\s*:",
    r"\$schema\s*[:=]", r"\{\s*\"\$image",
    r"kpt-set\s*:", r"x-release-please-", r"@schema\b", r"@ignored\b", r"@ignore\b",
    r"@raw\b", r"@notationType\b", r"@default\s+--",
    r"shellcheck\s+(?:disable|enable|source|shell|external-sources)\b",
    r"noqa(?::|\s*$)", r"flake8\s*:", r"ruff\s*:", r"type\s*:\s*ignore\b", r"pylint\s*:",
    r"pyright\s*:", r"mypy\s*:", r"pragma\s*:", r"fmt\s*:\s*(?:on|off|skip)\b",
    r"isort\s*:", r"nosec\b", r"nosemgrep\b", r"nolint\b", r"gitleaks\s*:\s*allow\b",
    r"yamllint\s+(?:disable|enable)", r"prettier-ignore\b", r"eslint-(?:disable|enable)",
    r"markdownlint-", r"cspell\s*:", r"spell-checker\s*:", r"codespell\s*:",
    r"editorconfig-checker-", r"hadolint\s+(?:ignore|shell|global)\b", r"checkov\s*:",
    r"tfsec\s*:", r"trivy\s*:", r"kics-scan\b", r"ansible-lint\b", r"code\s*:\s*language=",
    r"jinja2\s*:", r"syntax\s*=", r"escape\s*=", r"cloud-config\s*$",
    r"spdx-license-identifier\s*:", r"-\*-.*-\*-", r"vim?\s*:\s*(?:set\s)?\s*\w+=",
    r"vim?\s*:\s*set\b", r"kate\s*:", r"!\s*/", r"vale\s+(?:on|off|[\w.]+\s*=)",
)
_DIRECTIVE = re.compile("(?:" + "|".join(_DIRECTIVES) + ")", re.IGNORECASE)
_COMMENT = re.compile(r"^\s*(?:#+|//+|;+)(?P<body>.*)$")
_SCHEMA_MARK = re.compile(r"@schema\s*$", re.IGNORECASE)
_LOCAL_VARIABLES = re.compile(r"local variables\s*:\s*$", re.IGNORECASE)
_LOCAL_END = re.compile(r"end\s*:\s*$", re.IGNORECASE)
# Markdown-only markers, written as HTML comments: table-of-contents generators, terraform-docs
# and all-contributors insertion points.
_MARKDOWN_MARKER = re.compile(r"(?:toc|tocstop|omit (?:from|in) toc|(?:begin|end)_tf_docs|"
                              r"all-contributors|doctoc|start doctoc|end doctoc)\b",
                              re.IGNORECASE)
# An annotation written after a value: ``image: app:1.2 # {"$imagepolicy": "flux:app"}``.
# It starts only where a run of blanks starts: tried inside a long run it would rescan the run
# from every blank (quadratic).
_TRAILING = re.compile(r"(?<!\s)\s++#\s*+(?P<body>\S.*)$")


def is_annotation(body: str) -> bool:
    """Whether one comment's text (its leader removed) is a directive for a tool."""
    return bool(_DIRECTIVE.match(body.strip()))


def is_markdown_marker(body: str) -> bool:
    """Whether the text of a Markdown HTML comment (``<!-- x -->``: ``x``) is for a tool."""
    return is_annotation(body) or bool(_MARKDOWN_MARKER.match(body.strip()))


def comment_body(line: str) -> str | None:
    """A whole-line comment's text without its leader, or None for any other line."""
    match = _COMMENT.match(line)
    return match.group("body") if match else None


def annotation_lines(lines: list[str], first_line_shebang: bool = True) -> set[int]:
    """0-based numbers of the whole comment lines of ``lines`` that are annotations.

    ``first_line_shebang``: line 0 starting ``#!`` is the file's interpreter line (the
    script chunkers skip it themselves) and is not reported; any later ``#!`` line is.
    """
    found: set[int] = set()
    in_schema = in_locals = False
    for n, line in enumerate(lines):
        body = comment_body(line)
        if body is None:
            in_schema = in_locals = False
            continue
        text = body.strip()
        if n == 0 and first_line_shebang and line.startswith("#!"):
            continue
        if _SCHEMA_MARK.match(text):
            in_schema = not in_schema
            found.add(n)
        elif _LOCAL_VARIABLES.match(text):
            in_locals = True
            found.add(n)
        elif in_schema or in_locals or is_annotation(text):
            found.add(n)
            in_locals = in_locals and not _LOCAL_END.match(text)
    return found


def strip_trailing_annotation(line: str) -> str:
    """``line`` without an annotation comment written after its value (kept otherwise)."""
    if "#" not in line:
        return line
    match = _TRAILING.search(line)
    while match is not None:
        # A whole-line comment is judged by ``annotation_lines``, not cut to a blank line.
        if line[:match.start()].strip() and is_annotation(match.group("body")):
            return line[:match.start()]
        match = _TRAILING.search(line, match.start() + 1)
    return line
