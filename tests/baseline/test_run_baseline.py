"""``run --update-baseline`` and ``run --baseline`` end to end, on a stand-in plugin gate pinning a scalar, a
text, a small and a large cell array: every planted change fails the gate naming the figure."""

import json
import subprocess
import xml.etree.ElementTree as ET

import pytest

from tests.helpers import SCRIPT

MOVES = {
    "loss": "standin[N=4 M=3] loss: 402001206 -> 402001207",
    "name": "standin[N=4 M=3] name: standin -> standin-v2",
    "cell": "standin[N=4 M=3] grads: 1 of 12 cells moved, first [3, 2] 72 -> 73",
    "big-cell": "standin[N=4 M=3] big: cells moved in 1 of 250 blocks of 4, first [700]..[703]",
}


@pytest.fixture
def pinned(invoke, standin_site, tmp_path):
    r = invoke("run", "standin", "--update-baseline", "b.json")
    assert r.exit_code == 0, r.output
    return tmp_path / "b.json"


def test_an_unchanged_run_passes_its_baseline_check(invoke, pinned):
    r = invoke("run", "standin", "--baseline", "b.json")
    assert r.exit_code == 0, r.output
    assert " PASS baseline -- 4 figures as in b.json" in r.stdout.splitlines()


@pytest.mark.parametrize("move", sorted(MOVES))
def test_each_planted_change_fails_the_gate_naming_the_figure(invoke, pinned, monkeypatch, move):
    monkeypatch.setenv("NXGATES_STANDIN_MOVE", move)
    r = invoke("run", "standin", "--baseline", "b.json", "-q")
    assert r.exit_code == 1
    assert r.stdout.splitlines() == [" FAIL baseline -- 1 of 4 figures moved since b.json:", MOVES[move], "RED"]


def test_the_baseline_check_is_in_the_json_and_junit_reports(invoke, pinned, monkeypatch, tmp_path):
    monkeypatch.setenv("NXGATES_STANDIN_MOVE", "loss")
    r = invoke("run", "standin", "--baseline", "b.json", "--json", "r.json", "--junit", "r.xml")
    assert r.exit_code == 1
    gate = json.loads((tmp_path / "r.json").read_text())["gates"][0]
    check = gate["checks"][-1]
    assert check["name"] == "baseline" and not check["passed"] and MOVES["loss"] in check["detail"].splitlines()
    assert gate["label"] == "standin[N=4 M=3]" and gate["fingerprints"]["loss"] == 402001207
    failure = ET.parse(tmp_path / "r.xml").getroot().find("testsuite/testcase[@name='baseline']/failure")
    assert failure is not None and MOVES["loss"] in failure.text


def test_how_the_environment_differs_is_said_when_the_check_fails(invoke, pinned, monkeypatch):
    doc = json.loads(pinned.read_text())
    (entry,) = doc["entries"].values()
    entry["environment"]["numpy"] = "0.1"
    pinned.write_text(json.dumps(doc))
    r = invoke("run", "standin", "--baseline", "b.json", "-q")
    assert r.exit_code == 0 and "environment" not in r.stdout  # the figures stand: no environment lines
    monkeypatch.setenv("NXGATES_STANDIN_MOVE", "loss")
    r = invoke("run", "standin", "--baseline", "b.json", "-q")
    import numpy

    assert f"environment numpy: 0.1 -> {numpy.__version__}" in r.stdout.splitlines()


def test_the_executor_is_not_part_of_the_key(invoke, pinned):
    r = invoke("run", "standin", "--baseline", "b.json", "--set", "executor=process")
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("policy, code", [("fail", 1), ("warn", 0)])
def test_a_run_the_file_lacks_is_named_and_the_policy_decides(invoke, pinned, policy, code):
    r = invoke("run", "standin", "--baseline", "b.json", "--set", "N=5", "--baseline-missing", policy)
    assert r.exit_code == code
    word = "PASS" if code == 0 else "FAIL"
    suffix = " (--baseline-missing warn)" if policy == "warn" else ""
    assert (f" {word} baseline -- b.json has no entry for standin[N=5 M=3] (add it with --update-baseline)"
            f"{suffix}") in r.stdout.splitlines()


def test_the_default_policy_is_fail(invoke, pinned):
    assert invoke("run", "standin", "--baseline", "b.json", "--set", "M=4").exit_code == 1


@pytest.mark.parametrize("policy, code", [("fail", 1), ("warn", 0)])
def test_a_gate_that_pins_nothing_is_reported_never_silently_passed(invoke, pinned, monkeypatch, policy, code):
    monkeypatch.setenv("NXGATES_STANDIN_MOVE", "none")
    r = invoke("run", "standin", "--baseline", "b.json", "--baseline-missing", policy)
    assert r.exit_code == code
    assert "baseline -- no fingerprint: standin pins no figure to compare" in r.stdout


def test_update_merges_and_skips_what_it_cannot_pin(invoke, pinned, monkeypatch):
    assert invoke("run", "standin", "--set", "N=6", "--update-baseline", "b.json").exit_code == 0
    assert sorted(json.loads(pinned.read_text())["entries"]) == ["standin[M=3 N=4 scale=7]",
                                                                  "standin[M=3 N=6 scale=7]"]
    monkeypatch.setenv("NXGATES_STANDIN_MOVE", "none")
    before = pinned.read_text()
    r = invoke("run", "standin", "--set", "N=7", "--update-baseline", "b.json")
    assert r.exit_code == 0 and pinned.read_text() == before
    assert r.stderr == ("nxgates: warning: --update-baseline: standin[N=7 M=3] not written: it pins no figure "
                        "(no fingerprint)\n")


def test_a_baseline_entry_records_its_key_figures_and_environment(pinned):
    entry = json.loads(pinned.read_text())["entries"]["standin[M=3 N=4 scale=7]"]
    assert entry["gate"] == "standin" and entry["params"] == {"N": 4, "M": 3, "scale": 7}
    assert entry["label"] == "standin[N=4 M=3]" and entry["inputs"] is None
    assert set(entry["fingerprints"]) == {"loss", "name", "grads", "big"}
    env = entry["environment"]
    assert env["executor"] == "thread" and env["workers"] == 2 and {"nxgates", "python", "numpy", "blas", "os",
                                                                      "cpu"} <= env.keys()


def assert_one_line(r, fragment):
    assert r.exit_code == 2 and r.stdout == "" and len(r.stderr.splitlines()) == 1, r.output
    assert fragment in r.stderr


def test_a_planted_fault_never_updates_a_baseline(invoke, standin_site, tmp_path):
    r = invoke("run", "lora", "--inject", "grad-bug", "--update-baseline", "b.json")
    assert_one_line(r, "--update-baseline: a run with --inject never updates a baseline")
    assert not (tmp_path / "b.json").exists()


def test_a_planted_fault_ignores_the_baseline(invoke, pinned):
    r = invoke("run", "lora", "--inject", "grad-bug", "--baseline", "b.json", "-q")
    assert r.exit_code == 1 and "baseline" not in r.stdout


@pytest.mark.parametrize("text, fragment", [("{", "not a baseline file"),
                                            ('{"format": 9, "entries": {}}', "baseline format 9")])
def test_a_corrupt_baseline_is_exit_2_before_any_gate_runs_and_is_kept(invoke, standin_site, tmp_path, text,
                                                                       fragment):
    (tmp_path / "b.json").write_text(text)
    for flag in ("--baseline", "--update-baseline"):
        assert_one_line(invoke("run", "standin", flag, "b.json"), f"{flag} b.json: {fragment}")
    assert (tmp_path / "b.json").read_text() == text


def test_a_missing_baseline_and_a_symlink_are_exit_2(invoke, pinned, tmp_path):
    assert_one_line(invoke("run", "standin", "--baseline", "none.json"), "--baseline none.json: no such file")
    (tmp_path / "link.json").symlink_to(pinned)
    assert_one_line(invoke("run", "standin", "--update-baseline", "link.json"), "is a symlink")
    assert_one_line(invoke("run", "standin", "--baseline", "b.json", "--update-baseline", "b.json"),
                    "name the same file")


def test_two_concurrent_runs_into_one_file_keep_both_entries(standin_site, tmp_path):
    runs = [subprocess.Popen([SCRIPT, "run", "standin", "--set", f"N={n}", "--update-baseline", "b.json", "-q"],
                             cwd=tmp_path, stdout=subprocess.DEVNULL) for n in (11, 12)]
    assert [p.wait(timeout=120) for p in runs] == [0, 0]
    assert sorted(json.loads((tmp_path / "b.json").read_text())["entries"]) == [
        "standin[M=3 N=11 scale=7]", "standin[M=3 N=12 scale=7]"]


def test_the_options_and_the_documented_default_are_in_the_help(invoke):
    text = " ".join(invoke("run", "--help").stdout.split())
    assert "--baseline FILE" in text and "--update-baseline FILE" in text
    assert "--baseline-missing [fail|warn]" in text and "[default: fail]" in text


def test_repeated_runs_are_compared_once(invoke, pinned):
    r = invoke("run", "standin", "--baseline", "b.json", "--repeat", "3")
    assert r.exit_code == 0 and r.stdout.count("baseline --") == 1
