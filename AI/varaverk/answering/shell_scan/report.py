"""Findings: one destructive command each, collected once per scan."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Finding:
    """One destructive command.

    Attributes:
        line: 1-based line in the scanned text (for Markdown, the answer's own line).
        reason: why it is destructive, in one sentence an operator can act on.
        snippet: the source line of the command (stripped, at most 200 characters).
        rule: a short stable rule id (``rm-root``, ``dd-device``, ...), for tests and filters.
    """

    line: int
    reason: str
    snippet: str
    rule: str = ""

    def to_dict(self) -> dict:
        """A JSON-ready dict: ``{"line", "reason", "snippet", "rule"}``."""
        return asdict(self)


def by_line(findings: list[Finding]) -> list[Finding]:
    """``findings`` in reading order: by line, then rule id."""
    return sorted(findings, key=lambda f: (f.line, f.rule))


class Report:
    """The findings of one scan, each kept once."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []

    def add(self, line: int, reason: str, snippet: str, rule: str, via: str = "") -> None:
        """Record a finding; ``via`` names the string it was nested in (``bash -c``, ``ssh host``)."""
        if via:
            reason = f"{reason} (inside {via})"
        snippet = snippet.strip()
        if len(snippet) > 200:
            snippet = snippet[:197] + "..."
        finding = Finding(line, reason, snippet, rule)
        if finding not in self.findings:
            self.findings.append(finding)
