"""The documents stay honest: a short README that starts with the two commands a newcomer needs, links and
anchors that resolve, no development history in the text, and a performance table generated, not typed.

Each checker is also run against a planted defect, so a check that could never fail is caught too.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PERF_TABLE = ROOT / "tools" / "perf_table.py"
DOC_FILES = sorted(DOCS.glob("*.md"))
LINKED_FILES = [README, ROOT / "CHANGELOG.md", *DOC_FILES]
EXPECTED_DOCS = {"usage.md", "reports.md", "gates.md", "crosscheck.md", "plugins.md", "distributed.md", "design.md",
                 "performance.md", "development.md"}

README_MAX_LINES = 250
README_FIRST_LINES = 40

#: development history has no place in a product's documents or code: it lives in git and CHANGELOG.md
#: (the timing tool's name is spelled with a character class so that this file does not contain it)
HISTORY = [
    re.compile(r"\bissue [0-9]+", re.IGNORECASE),
    re.compile(r"\b(first|second|third|fourth|fifth|this|last) round\b", re.IGNORECASE),
    re.compile(r"[0-9]{1,2}:[0-9]{2} UTC"),
    re.compile(r"farm-ben[c]h", re.IGNORECASE),
]

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


# ---- the checkers ----------------------------------------------------------------------------------------


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|__", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every anchor the headings of ``markdown`` define (outside code blocks), duplicates numbered."""
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCE.sub("", markdown)):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(path: Path) -> list[str]:
    """The relative links of ``path`` whose file or anchor does not exist (links in code are not links)."""
    text = path.read_text(encoding="utf-8")
    prose = INLINE_CODE.sub("", FENCE.sub("", text))
    broken = []
    for target in LINK.findall(prose):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...: not ours to check
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{target} (no file {linked})")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked.read_text(encoding="utf-8")):
            broken.append(f"{target} (no heading makes #{anchor} in {linked.name})")
    return broken


def history_lines(path: Path, root: Path = ROOT) -> list[str]:
    """Lines of ``path`` that read as a lab notebook rather than as facts about the product."""
    hits = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if any(p.search(line) for p in HISTORY):
            hits.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return hits


def run_perf_table(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(PERF_TABLE), *args], capture_output=True, text=True, check=False)


# ---- the README ------------------------------------------------------------------------------------------


def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; at most {README_MAX_LINES}"


def test_readme_opens_with_the_two_commands_a_newcomer_needs():
    opening = "\n".join(README.read_text(encoding="utf-8").splitlines()[:README_FIRST_LINES])
    for command in ("make run", "make test"):
        assert re.search(rf"^{command}\b", opening, re.MULTILINE), f"`{command}` not in README's first lines"


def test_every_topic_has_its_document():
    assert {p.name for p in DOC_FILES} >= EXPECTED_DOCS


# ---- links and anchors -----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", LINKED_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path):
    assert broken_links(path) == []


def test_the_link_checker_catches_a_missing_file_and_a_missing_anchor(tmp_path):
    (tmp_path / "there.md").write_text("# A heading\n\n## Use in CI: `--json`\n")
    doc = tmp_path / "doc.md"
    doc.write_text("[ok](there.md#a-heading) [ok](there.md#use-in-ci---json) [ok](#local)\n\n## Local\n"
                   "[gone](missing.md) [no anchor](there.md#nowhere) `[code](ignored.md)`\n"
                   "```\n[in a block](also-ignored.md)\n```\n[web](https://example.org/x)\n")
    assert broken_links(doc) == [f"missing.md (no file {tmp_path / 'missing.md'})",
                                 "there.md#nowhere (no heading makes #nowhere in there.md)"]


def test_anchors_are_githubs():
    assert anchors("# Liar-kill: every gate proves it can fail\n## Use in CI\n## Use in CI\n```\n# not one\n```\n") == {
        "liar-kill-every-gate-proves-it-can-fail", "use-in-ci", "use-in-ci-1"}


# ---- no development history ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [README, *DOC_FILES], ids=lambda p: str(p.relative_to(ROOT)))
def test_documents_carry_no_development_history(path):
    assert history_lines(path) == []


def test_code_carries_no_development_history():
    hits = [hit for folder in ("nxgates", "benchmarks", "tools") for path in sorted((ROOT / folder).rglob("*.py"))
            for hit in history_lines(path)]
    assert hits == []


@pytest.mark.parametrize("line", ["see issue 13", "in the third round", "run at 14:10 UTC",
                                  "timed by farm-" + "bench", "This Round read 1.2x"])
def test_the_history_patterns_catch_a_notebook_line(tmp_path, line):
    path = tmp_path / "notebook.md"
    path.write_text(f"A fact.\n{line}\n", encoding="utf-8")
    assert history_lines(path, tmp_path) == [f"notebook.md:2: {line}"]


# ---- the generated performance table ---------------------------------------------------------------------

SAMPLE_BENCH = {
    "machine": {"cpus": 2, "python": "3.11.9", "two_core_control": 1.97},
    "lora": {"large": {"fast_seconds": 0.0071, "naive_seconds": 2.37, "ratio": 333.8, "cells": 4096},
             "large_whole_process_seconds": 0.14},
    "parallel-grad": {"large/process": {"serial_seconds": 0.183, "parallel_seconds": 0.082, "speedup": 2.23,
                                        "rss_self": 102 << 20, "rss_children": 79 << 20}},
    "training": {"lora-train/large/-": {"seconds": 0.2, "passed": True}},
    "targets": [{"target": "lora large: fast >= 50x naive", "met": True, "figure": "334x"},
                {"target": "lora large: fast gradcheck on 2 workers vs 1 >= 1.7x", "met": False, "figure": "0.3x"}],
}


def perf_doc(tmp_path: Path) -> Path:
    doc = tmp_path / "performance.md"
    doc.write_text("# Performance\n\nBefore.\n\n<!-- perf-table -->\nstale figures\n<!-- perf-table -->\n\nAfter.\n")
    return doc


def test_perf_table_renders_the_bench_json_between_the_markers(tmp_path):
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(SAMPLE_BENCH))
    doc = perf_doc(tmp_path)
    r = run_perf_table("--bench", str(bench), "--doc", str(doc))
    assert r.returncode == 0, r.stderr
    text = doc.read_text()
    assert text.startswith("# Performance\n\nBefore.\n\n<!-- perf-table -->\n")
    assert text.endswith("<!-- perf-table -->\n\nAfter.\n")
    assert "stale figures" not in text
    assert "2 CPUs, Python 3.11.9; two-core control 1.97x" in text
    assert "| lora large: fast >= 50x naive | 334x | met |" in text
    assert "| lora large: fast gradcheck on 2 workers vs 1 >= 1.7x | 0.3x | **missed** |" in text
    assert "| large | 4096 | 0.007 s | 2.370 s | 334x |" in text
    assert "| large/process | 0.183 s | 0.082 s | 2.23x | 102 MiB + 79 MiB |" in text
    assert "| lora-train/large/- | 0.200 s | yes |" in text
    assert run_perf_table("--bench", str(bench), "--doc", str(doc)).returncode == 0
    assert doc.read_text() == text  # rendering twice changes nothing


def test_perf_table_refuses_a_missing_bench_json_with_exit_2(tmp_path):
    doc = perf_doc(tmp_path)
    before = doc.read_text()
    r = run_perf_table("--bench", str(tmp_path / "absent.json"), "--doc", str(doc))
    assert r.returncode == 2
    assert len(r.stderr.splitlines()) == 1 and "make bench" in r.stderr
    assert doc.read_text() == before


def test_perf_table_refuses_a_document_without_its_markers(tmp_path):
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(SAMPLE_BENCH))
    doc = tmp_path / "performance.md"
    doc.write_text("# Performance\n<!-- perf-table -->\nonly one marker\n")
    r = run_perf_table("--bench", str(bench), "--doc", str(doc))
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1


def test_the_documents_hold_their_generated_and_maintained_parts():
    assert (DOCS / "performance.md").read_text(encoding="utf-8").count("<!-- perf-table -->\n") == 2
    assert (DOCS / "design.md").read_text(encoding="utf-8").count("<!-- module-map -->\n") == 2
    assert re.search(r"^docs:\n\t.*tools/perf_table\.py", (ROOT / "Makefile").read_text(), re.MULTILINE)
