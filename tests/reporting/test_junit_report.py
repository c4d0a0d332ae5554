"""JUnit XML: a suite per gate, a case per check, failures with their detail, timeouts as errors."""

import json
import xml.etree.ElementTree as ET


def suites(path):
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    return root, {s.get("name"): s for s in root.findall("testsuite")}


def test_junit_has_a_suite_per_gate_and_a_case_per_check(invoke, tmp_path):
    r = invoke("run", "lora", "parallel-grad", "--junit", "out.xml")
    assert r.exit_code == 0
    root, by_name = suites(tmp_path / "out.xml")
    assert set(by_name) == {"lora", "parallel-grad"}
    assert root.get("tests") == "6" and root.get("failures") == "0" and root.get("errors") == "0"
    cases = by_name["lora"].findall("testcase")
    assert [c.get("name") for c in cases] == ["gradcheck A (lora)", "gradcheck B (lora)", "base W frozen"]
    for case in cases:
        assert float(case.get("time")) >= 0 and case.get("classname") == "nxgates.lora"
        assert case.find("failure") is None and case.find("error") is None


def test_junit_failure_carries_the_detail(invoke, tmp_path):
    r = invoke("run", "lora", "--inject", "train-base", "--junit", "out.xml")
    assert r.exit_code == 1
    root, by_name = suites(tmp_path / "out.xml")
    assert root.get("failures") == "1"
    (failed,) = [c for c in by_name["lora"].findall("testcase") if c.find("failure") is not None]
    assert failed.get("name") == "base W frozen"
    assert "cells of W changed" in failed.find("failure").get("message")


def test_timeout_is_a_failed_gate_and_a_junit_error(invoke, tmp_path):
    r = invoke("run", "lora", "parallel-grad", "--preset", "medium", "--timeout", "0.001",
               "--junit", "out.xml", "--json", "out.json")
    assert r.exit_code == 1
    assert "RED -- timed out after 0.001 s" in r.stdout
    root, by_name = suites(tmp_path / "out.xml")
    assert root.get("errors") == "2"
    assert by_name["parallel-grad"].find("testcase/error").get("type") == "timeout"
    doc = json.loads((tmp_path / "out.json").read_text())
    assert [g["error"] for g in doc["gates"]] == ["timed out after 0.001 s"] * 2
