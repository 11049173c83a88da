"""House rules that keep the project runnable: module names, entry point headers."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = ["PURPOSE", "OPERATIONAL MODEL", "DESIGN PRINCIPLES", "OPERATIONAL SAFEGUARDS",
            "CONFIGURATION", "RUNTIME MODES"]


def tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", *patterns],
                         capture_output=True, check=True).stdout
    return [ROOT / p for p in out.decode().split("\0") if p]


def test_no_module_shadows_the_standard_library():
    # Entry points run as files put their own folder first on sys.path.
    for folder in ("AI", "Plugin", "Tools"):
        for path in (ROOT / folder).rglob("*.py"):
            assert path.stem not in sys.stdlib_module_names, path


def test_every_entry_point_carries_the_six_sections_in_order():
    entry_points = [p for p in tracked("AI/**/*.py", "Plugin/**/*.py", "Tools/**/*.py")
                    if "__main__" in p.read_text(encoding="utf-8")]
    assert entry_points, "no entry points found"
    for path in entry_points:
        lines = path.read_text(encoding="utf-8").splitlines()
        assert lines[0].startswith("#!"), f"{path.name}: no shebang"
        found = [re.sub(r"^[#\s]*|[\s:]*$", "", line) for line in lines[:300]]
        positions = [found.index(s) if s in found else -1 for s in SECTIONS]
        assert -1 not in positions, f"{path.name}: missing {SECTIONS[positions.index(-1)]}"
        assert positions == sorted(positions), f"{path.name}: sections out of order"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
                if line.strip() and not line.lstrip().startswith("#")]
    assert ci_lines[-1] in readme, "the last line of .ci/run must be README command 2"


def test_only_the_support_module_reaches_for_the_shared_folder():
    # A user's clone has no ../shared: the tests reach it only through shared_corpus(), which
    # skips with its reason when it is absent.
    offenders = [p for p in tracked("tests/*.py", "tests/**/*.py")
                 if p.name != "repos.py" and re.search(r"\bSHARED\b|\.\./shared/(fixtures|eval)",
                                                       p.read_text(encoding="utf-8"))]
    assert offenders == []


PACKAGES = {"AI": "varaverk", "Plugin": "varaverk_dock", "Tools": "varaverk_tools"}
MAX_MODULE_LINES = 600


def _layout_rows() -> dict[str, str]:
    """README's layout table as ``{path: role}``."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1]
    return rows


def _modules(root: Path = ROOT) -> set[str]:
    """Every package (``AI/varaverk/index/``) and module (``…/refresh.py``) of the three."""
    found = set()
    for folder, package in PACKAGES.items():
        for path in (root / folder / package).rglob("*.py"):
            rel = path.relative_to(root).as_posix()
            found.add(rel.rsplit("/", 1)[0] + "/" if path.name == "__init__.py" else rel)
    return found


def test_the_readme_layout_table_names_every_package_and_module_with_its_role():
    rows = _layout_rows()
    modules = _modules()
    assert len(modules) > 100, "the packages were not found"
    assert sorted(modules - rows.keys()) == [], "modules the layout table does not name"
    stale = [p for p in rows if p.startswith(tuple(PACKAGES)) and p not in modules]
    assert stale == [], "the layout table names modules that are gone"
    assert [p for p in modules if len(rows[p]) < 10] == [], "a row without its role"


def test_the_layout_check_sees_every_module_and_package(tmp_path):
    (tmp_path / "AI" / "varaverk" / "index").mkdir(parents=True)
    for name in ("AI/varaverk/__init__.py", "AI/varaverk/index/__init__.py",
                 "AI/varaverk/index/refresh.py"):
        (tmp_path / name).write_text("")
    assert _modules(tmp_path) == {"AI/varaverk/", "AI/varaverk/index/",
                                  "AI/varaverk/index/refresh.py"}


def test_no_module_is_over_the_line_cap():
    over = {p: n for p in _modules() if p.endswith(".py")
            for n in [len((ROOT / p).read_text(encoding="utf-8").splitlines())]
            if n > MAX_MODULE_LINES}
    assert over == {}


def test_every_command_line_parser_uses_the_house_help_formatter():
    """Each ``argparse.ArgumentParser`` is given ``varaverk.cli.HelpFormatter``: argparse's own
    formatters import shutil (and bz2, lzma) on every start to learn the terminal width."""
    import ast

    parsers = 0
    for path in tracked("AI/**/*.py", "Plugin/**/*.py", "Tools/**/*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("ArgumentParser"):
                parsers += 1
                given = {k.arg: ast.unparse(k.value) for k in node.keywords}
                assert given.get("formatter_class") == "HelpFormatter", \
                    f"{path.name}:{node.lineno}: formatter_class={given.get('formatter_class')}"
    assert parsers >= 8, "the entry points' parsers were not found"
