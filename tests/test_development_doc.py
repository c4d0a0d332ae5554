"""docs/development.md's table of the test tree is the tree: every folder of tests/ has its row, and every
folder a row names exists. Each check is also run against a planted defect, so a check that could never
fail is caught too."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEVELOPMENT = ROOT / "docs" / "development.md"
TESTS = ROOT / "tests"

#: a row of the table: its first cell is a folder of tests/ in backticks, ending in a slash
ROW = re.compile(r"^\|\s*`(tests/(?:[^`|]*/)?)`\s*\|", re.MULTILINE)


def table_folders(markdown: str) -> list[str]:
    """The folders the "Test layout" section's table names, in its order (``tests/`` itself included)."""
    section = markdown.split("## Test layout", 1)[1].split("\n## ", 1)[0]
    return ROW.findall(section)


def tree_folders(root: Path) -> set[str]:
    """Every folder under ``root`` that holds a file (named as ``tests/…/``), ``root`` included: as git sees
    the tree, so caches, hidden folders and a folder only a cache is left in are no part of it."""
    found = {f"{root.name}/"}
    for path in root.rglob("*"):
        parts = path.relative_to(root).parts
        if path.is_file() and not any(p == "__pycache__" or p.startswith(".") for p in parts):
            found.update(f"{root.name}/{'/'.join(parts[:n])}/" for n in range(1, len(parts)))
    return found


def mismatches(named: list[str], tree: set[str]) -> list[str]:
    """What is wrong with the table against the tree: folders without a row, rows without a folder, and rows
    given twice."""
    problems = [f"no row for {folder}" for folder in sorted(tree - set(named))]
    problems += [f"a row for {folder}, which does not exist" for folder in sorted(set(named) - tree)]
    problems += [f"two rows for {folder}" for folder in sorted({f for f in named if named.count(f) > 1})]
    return problems


def test_the_table_names_every_folder_of_the_test_tree_and_no_other():
    named = table_folders(DEVELOPMENT.read_text(encoding="utf-8"))
    assert "tests/" in named and "tests/behaviour/" in named  # the table was found and read
    assert mismatches(named, tree_folders(TESTS)) == []


def test_a_folder_without_a_row_is_caught(tmp_path):
    tree = tmp_path / "tests"
    for folder in ("core/tape", "core/__pycache__", ".hidden", "gone/__pycache__"):
        (tree / folder).mkdir(parents=True)
        (tree / folder / "a_file").write_text("")
    assert tree_folders(tree) == {"tests/", "tests/core/", "tests/core/tape/"}
    doc = "## Test layout\n\n| folder | what |\n|---|---|\n| `tests/` | a |\n| `tests/core/` | b |\n\n## Next\n"
    assert table_folders(doc) == ["tests/", "tests/core/"]
    assert mismatches(table_folders(doc), tree_folders(tree)) == ["no row for tests/core/tape/"]


def test_a_row_without_a_folder_or_given_twice_is_caught():
    doc = ("## Test layout\n\n| folder | what |\n|---|---|\n| `tests/` | a |\n| `tests/gone/` | b |\n"
           "| `tests/` | c |\n\n## Next\n\n| `tests/elsewhere/` | a table of another section is not read |\n")
    assert table_folders(doc) == ["tests/", "tests/gone/", "tests/"]
    assert mismatches(table_folders(doc), {"tests/"}) == ["a row for tests/gone/, which does not exist",
                                                          "two rows for tests/"]
