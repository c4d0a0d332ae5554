"""``nxgates diff A.json B.json``: exit 0 same, 1 different (one line per moved figure), 2 unreadable or not
comparable; environment differences are listed but decide nothing."""

import json

import pytest


def report(gates, numpy="2.0"):
    return {"nxgates": "0.1.0", "passed": True, "gates": gates,
            "environment": {"nxgates": "0.1.0", "numpy": numpy, "gates": []}}


def gate(name="lora", passed=True, metrics=None, fingerprints=None, **params):
    item = {"name": name, "passed": passed, "params": {"T": 3, "DM": 6, "R": 2, "executor": "auto", **params},
            "checks": [], "metrics": metrics or {}}
    if fingerprints is not None:
        item["label"] = "lora[T=3 DM=6 R=2]"
        item["fingerprints"] = fingerprints
    return item


@pytest.fixture
def diff(invoke, tmp_path):
    def _diff(a, b):
        (tmp_path / "a.json").write_text(json.dumps(a))
        (tmp_path / "b.json").write_text(json.dumps(b))
        return invoke("diff", "a.json", "b.json")

    return _diff


def test_the_same_figures_are_exit_0(diff):
    r = diff(report([gate(metrics={"loss_q": 5})]), report([gate(metrics={"loss_q": 5})]))
    assert r.exit_code == 0
    assert r.stdout.splitlines() == ["==== nxgates diff: 0 figures differ in 0 gate runs, 1 in both reports -- SAME"]


def test_a_moved_fingerprint_is_one_line_and_exit_1(diff):
    a = report([gate(fingerprints={"loss_q": 1329684529960, "d": "x"})])
    b = report([gate(fingerprints={"loss_q": 1329684529961, "d": "x"})])
    r = diff(a, b)
    assert r.exit_code == 1
    assert r.stdout.splitlines()[0] == "lora[T=3 DM=6 R=2] loss_q: 1329684529960 -> 1329684529961"
    assert r.stdout.splitlines()[-1].endswith("-- DIFFERENT")


def test_metrics_compare_without_timings_or_the_pool(diff):
    a = report([gate(metrics={"A": {"analytic": [1, 2, 3]}, "serial_seconds": 1.0, "workers": 2})])
    b = report([gate(metrics={"A": {"analytic": [1, 2, 4]}, "serial_seconds": 2.0, "workers": 3})])
    r = diff(a, b)
    assert r.exit_code == 1
    assert r.stdout.splitlines()[:-1] == ["environment lora[T=3 DM=6 R=2] workers: 2 -> 3",
                                          "lora[T=3 DM=6 R=2] A.analytic: 1 of 3 items moved, first [2] 3 -> 4"]


def test_environment_differences_are_listed_but_not_a_difference(diff):
    a = report([gate(metrics={"x": 1})], numpy="1.26")
    b = report([gate(metrics={"x": 1}, executor="thread")], numpy="2.0")  # another executor: the same run
    r = diff(a, b)
    assert r.exit_code == 0
    assert r.stdout.splitlines()[:2] == ["environment numpy: 1.26 -> 2.0",
                                         "environment lora[T=3 DM=6 R=2] executor: auto -> thread"]


def test_a_gate_run_only_one_report_has_is_a_difference(diff):
    r = diff(report([gate(), gate(T=4)]), report([gate()]))
    assert r.exit_code == 1 and "lora[T=4 DM=6 R=2]: only in a.json" in r.stdout.splitlines()


def test_a_verdict_that_changed_is_a_difference(diff):
    r = diff(report([gate()]), report([gate(passed=False)]))
    assert r.exit_code == 1 and "lora[T=3 DM=6 R=2] passed: true -> false" in r.stdout.splitlines()


@pytest.mark.parametrize("b, fragment", [
    ("{", "diff b.json: not an nxgates JSON report (corrupt JSON: "),
    ('{"gates": 1}', "diff b.json: not an nxgates JSON report"),
    ('{"gates": [{"name": "lora"}]}', "not an nxgates JSON report"),
    (json.dumps(report([gate(name="other")])), "a.json and b.json have no gate run in common"),
])
def test_unreadable_or_not_comparable_is_one_line_and_exit_2(invoke, tmp_path, b, fragment):
    (tmp_path / "a.json").write_text(json.dumps(report([gate()])))
    (tmp_path / "b.json").write_text(b)
    r = invoke("diff", "a.json", "b.json")
    assert r.exit_code == 2 and r.stdout == "" and len(r.stderr.splitlines()) == 1 and fragment in r.stderr


def test_a_missing_file_is_exit_2(invoke):
    r = invoke("diff", "nope.json", "nope2.json")
    assert r.exit_code == 2 and "diff nope.json: no such file" in r.stderr


def test_two_real_runs_on_two_worker_counts_are_the_same(invoke, tmp_path):
    assert invoke("run", "lora", "-q", "--json", "a.json").exit_code == 0
    assert invoke("run", "lora", "-q", "--json", "b.json", "--set", "workers=2").exit_code == 0
    r = invoke("diff", "a.json", "b.json")
    assert r.exit_code == 0, r.stdout
