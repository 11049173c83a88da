"""Shell code blocks of a Markdown answer, with the answer's line numbers."""

from __future__ import annotations

import re

# Fence info strings whose block is shell. Untagged fences count too: models often omit the tag.
SHELL_FENCE_LANGUAGES = frozenset({"", "bash", "sh", "shell", "zsh", "ksh", "dash", "ash",
                                   "console", "shell-session", "shellsession", "bash-session",
                                   "sh-session", "terminal", "shellscript", "bashrc"})
_PROMPTED = frozenset({"console", "shell-session", "shellsession", "bash-session",
                       "sh-session", "terminal"})


def extract_shell_blocks(markdown: str) -> list[tuple[int, str]]:
    """Shell code blocks of a Markdown text: ``[(first_line, code)]``, lines 1-based.

    Fenced blocks tagged bash/sh/shell/zsh/console... or untagged, and indented code blocks.
    Console-style blocks keep only prompted lines (``$ cmd``), without the prompt.
    """
    from markdown_it import MarkdownIt

    blocks: list[tuple[int, str]] = []
    for tok in MarkdownIt("commonmark").parse(markdown):
        if tok.type == "fence" and tok.map:
            lang = (tok.info or "").strip().split()[0].lower() if (tok.info or "").strip() else ""
            lang = lang.strip("{}.")
            if lang not in SHELL_FENCE_LANGUAGES:
                continue
            code = tok.content
            if lang in _PROMPTED:
                code = _strip_prompts(code)
            blocks.append((tok.map[0] + 2, code))
        elif tok.type == "code_block" and tok.map:
            blocks.append((tok.map[0] + 1, tok.content))
    return blocks


def _strip_prompts(code: str) -> str:
    """Console lines without their prompt; output lines blank."""
    out = []
    for line in code.split("\n"):
        m = re.match(r"^\s*(?:\S+@\S+\s*)?(?:[\w~/.:-]*)?[$%#]\s(.*)$", line)
        out.append(m.group(1) if m else "")  # output lines become blank, keeping line numbers
    return "\n".join(out)


def has_fence(text: str) -> bool:
    """True when ``text`` holds a fenced code block (so is read as Markdown)."""
    return bool(re.search(r"^\s{0,3}(```|~~~)", text, re.M))
