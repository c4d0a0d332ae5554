"""GitHub Actions output: ``::error`` annotations and the Markdown job summary, made from the JSON document,
present on the platform (or when asked for) and absent elsewhere."""

import json

import pytest

from nxgates.reporting import github


def doc_with_failures(n: int) -> dict:
    checks = [{"name": f"check {i}", "passed": False, "detail": f"cell {i} off"} for i in range(n)]
    checks.append({"name": "fine", "passed": True, "detail": "ok"})
    gate = {"name": "g", "passed": False, "seconds": 0.5, "params": {"N": 3}, "fault": None, "error": None,
            "checks": checks, "metrics": {"worst": 7, "digest": "ab" * 32, "cells": [1, 2]}}
    return {"nxgates": "0.1.0", "passed": False, "gates": [gate], "environment": {"gates": []}}


@pytest.fixture
def off_github(monkeypatch):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def test_messages_escape_what_ends_a_workflow_command():
    assert github.escape_data("50%\r\nnext") == "50%25%0D%0Anext"
    assert github.escape_property("lora: A, B") == "lora%3A A%2C B"


def test_at_most_ten_errors_then_one_notice_counting_the_rest():
    lines = github.annotations(doc_with_failures(13))
    assert len(lines) == 11
    assert lines[0] == "::error title=g%3A check 0::cell 0 off"
    assert all(line.startswith("::error ") for line in lines[:10])
    assert lines[10].startswith("::notice::3 more failed checks not annotated")


def test_no_failure_no_annotation():
    doc = doc_with_failures(0)
    assert github.annotations(doc) == []


def test_resolve_follows_the_platform_and_the_options():
    assert github.resolve(None, None, {}) is None
    assert github.resolve(None, None, {"GITHUB_ACTIONS": "false"}) is None
    on = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": "/s.md"}
    assert github.resolve(None, None, on) == github.GitHubOutput(True, "/s.md", True)
    assert github.resolve("none", None, on) is None
    assert github.resolve("github", None, {}) == github.GitHubOutput(True, None, False)
    assert github.resolve(None, "x.md", {}) == github.GitHubOutput(False, "x.md", False)


def test_summary_has_the_table_figures_and_failing_details():
    text = github.summary_markdown(doc_with_failures(2))
    assert text.startswith("## nxgates: FAILED\n")
    assert "| g | check 0 | **FAIL** | cell 0 off |" in text
    assert "| g | fine | PASS | ok |" in text
    assert "`worst=7`" in text and "`digest=abababababababab...`" in text
    assert "### Failing details" in text and "- **g: check 1**" in text


def test_summary_cells_cannot_break_the_table():
    doc = doc_with_failures(1)
    doc["gates"][0]["checks"][0]["detail"] = "a | b\nc"
    assert "| a \\| b c |" in github.summary_markdown(doc)


def test_off_github_a_failing_run_prints_no_annotation(invoke, off_github, tmp_path):
    r = invoke("run", "lora", "--inject", "grad-bug")
    assert r.exit_code == 1
    assert "::error" not in r.output and "::notice" not in r.output
    assert list(tmp_path.iterdir()) == []  # and writes no summary anywhere


def test_on_github_the_planted_fault_is_annotated_and_summarised(invoke, off_github, monkeypatch, tmp_path):
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    r = invoke("run", "lora", "--inject", "grad-bug", "--json", "r.json")
    assert r.exit_code == 1
    errors = [line for line in r.output.splitlines() if line.startswith("::error")]
    assert errors == ["::error title=lora%3A gradcheck A (lora)::11/12 cells within 70permil (worst=101permil)"]
    text = summary.read_text()
    assert text.startswith("earlier step\n## nxgates: FAILED\n")  # appended, as GitHub expects
    assert "| lora | gradcheck A (lora) | **FAIL** | 11/12 cells within 70permil (worst=101permil) |" in text
    assert "fault planted: `grad-bug`" in text
    doc = json.loads((tmp_path / "r.json").read_text())  # the same data as --json: they cannot disagree
    assert github.summary_markdown(doc) == text[len("earlier step\n"):]


def test_on_github_a_green_run_annotates_nothing(invoke, off_github, monkeypatch, tmp_path):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    r = invoke("run", "lora")
    assert r.exit_code == 0 and "::error" not in r.output


def test_options_ask_for_both_off_the_platform(invoke, off_github, tmp_path):
    r = invoke("run", "lora", "--inject", "train-base", "--annotations", "github", "--summary", "s.md")
    assert r.exit_code == 1
    assert "::error title=lora%3A base W frozen::" in r.output
    assert "| lora | base W frozen | **FAIL** |" in (tmp_path / "s.md").read_text()


def test_annotations_none_silences_the_platform(invoke, off_github, monkeypatch, tmp_path):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "s.md"))
    r = invoke("run", "lora", "--inject", "grad-bug", "--annotations", "none")
    assert r.exit_code == 1 and "::error" not in r.output
    assert not (tmp_path / "s.md").exists()


def test_a_summary_that_cannot_be_written_is_exit_2_before_any_gate(invoke, off_github, tmp_path):
    r = invoke("run", "lora", "--summary", str(tmp_path / "no-such-dir" / "s.md"))
    assert r.exit_code == 2
    assert "--summary" in r.output and "does not exist" in r.output
    assert "PASS" not in r.output
