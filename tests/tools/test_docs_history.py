"""The documents describe the product as it is: no lab-notebook phrases about a session, a stop or partial
runs, and no figures set against the code as it used to be (git log and CHANGELOG.md keep that history).
Each pattern is also shown catching a planted line, so a pattern that could never match is caught too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

NOTEBOOK = [
    re.compile(r"\b(this|that|the last|an? earlier|an? previous|the previous|the next|one) session\b", re.IGNORECASE),
    re.compile(r"\bearlier sessions?\b", re.IGNORECASE),
    re.compile(r"\bpartial runs?\b", re.IGNORECASE),
    re.compile(r"\bthis stop\b", re.IGNORECASE),
    re.compile(r"\bbefore (the|these|this) changes?\b", re.IGNORECASE),
    re.compile(r"\bas it was at\b", re.IGNORECASE),
    re.compile(r"\b(has|have) changed since\b", re.IGNORECASE),
]


def notebook_lines(path: Path, root: Path = ROOT) -> list[str]:
    return [f"{path.relative_to(root)}:{number}: {line.strip()}"
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
            if any(pattern.search(line) for pattern in NOTEBOOK)]


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_documents_hold_no_notebook_phrases(path):
    assert notebook_lines(path) == []


@pytest.mark.parametrize("line", [
    "0.99x in one run this session",
    "as measured in an earlier session",
    "figures from partial runs",
    "the queue at this stop",
    "against the code before these changes",
    "those rows are of the code as it was at that run",
    "those files have changed since",
])
def test_a_planted_notebook_line_is_caught(tmp_path, line):
    path = tmp_path / "doc.md"
    path.write_text(f"# A document\n\nA fact about the code.\n{line}\n", encoding="utf-8")
    assert notebook_lines(path, tmp_path) == [f"doc.md:4: {line}"]


def test_facts_about_the_code_are_not_caught(tmp_path):
    path = tmp_path / "doc.md"
    path.write_text("A Dask session's cluster starts once.\nThe run stops at the first failure.\n"
                    "Runs that change nothing are skipped.\n", encoding="utf-8")
    assert notebook_lines(path, tmp_path) == []
