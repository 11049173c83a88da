"""The attack suite's index (README.md beside this file) names only tests that exist."""

from __future__ import annotations

import ast
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def test_every_test_the_index_names_exists():
    named = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", (HERE / "README.md").read_text())
    assert len(named) >= 25
    missing = []
    for path, name in named:
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        functions = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        if name not in functions:
            missing.append(f"{path}::{name}")
    assert missing == []
