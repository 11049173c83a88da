"""Code says what a case is, not which line of a file outside the repository names it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CASE_ID = re.compile(r"\bB\d{2}[a-z]?\b")


def test_no_case_ids_in_code_comments_or_docstrings():
    found = []
    for folder in ("AI", "Plugin", "Tools"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in {".py", ".js", ".md", ".html", ".css"} or not path.is_file():
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if CASE_ID.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == []
