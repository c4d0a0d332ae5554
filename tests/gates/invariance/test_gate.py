"""The invariance gate on its built-in target (nxgates' own per-example gradients): green, every planted
fault caught by the checks it names, the figures a baseline pins, and its metrics."""

import json

import numpy as np
import pytest

from nxgates.gates.invariance import CHECKS, FAULTS, I1, I4, I5
from nxgates.gates.invariance.builtin import mlp_grads, seed_arrays
from nxgates.runner import run_gate


def verdicts(report):
    return {c.name: c.passed for c in report.output.checks}


def test_the_built_in_target_passes_every_check(entry):
    report = run_gate(entry, entry.defaults, timeout=60)
    assert report.error is None
    assert verdicts(report) == {name: True for name in CHECKS}
    m = report.output.metrics
    assert m["target"] == "nxgates.gates.invariance.builtin:mlp_grads"
    assert m["rows"] == 8 and m["outputs"] == {"out": {"dtype": "float32", "shape": [8, 192]}}
    assert m["distinct_workers"] >= 2
    assert m["calls"] > 2 * len(CHECKS) and m["target_seconds"] > 0


def test_the_built_in_target_is_the_tapes_per_example_gradients(entry):
    arrays = seed_arrays(entry.defaults)
    rows = mlp_grads(**arrays)
    assert rows.shape == (8, 192) and rows.dtype == np.float32
    assert np.count_nonzero(rows) > 192  # not vacuous: more non-zero cells than one row has
    from nxgates.core.mlp import Dims, example_grads
    from nxgates.core.tape import Tape

    dims = Dims(8, 16, 4)
    w = np.concatenate([arrays["W1"].ravel(), arrays["W2"].ravel()])
    one = np.empty(dims.n_params, np.float32)
    example_grads(Tape(dims.arena), dims, w, arrays["X"][3], arrays["T"][3], one)
    assert one.tobytes() == rows[3].tobytes()
    # its tapes are reused from call to call: a call with other weights gets a fresh tape's bits for them
    other = {**arrays, "W1": arrays["W1"][::-1] * np.float32(1.5), "W2": -arrays["W2"]}
    rows = mlp_grads(**other)
    w = np.concatenate([other["W1"].ravel(), other["W2"].ravel()])
    example_grads(Tape(dims.arena), dims, w, other["X"][3], other["T"][3], one)
    assert one.tobytes() == rows[3].tobytes() and np.count_nonzero(one)


@pytest.mark.parametrize("fault", list(FAULTS))
def test_each_fault_fails_the_checks_it_names(entry, fault):
    report = run_gate(entry, entry.defaults, fault=fault, timeout=60)
    assert report.error is None
    failed = {name for name, ok in verdicts(report).items() if not ok}
    assert failed >= set(FAULTS[fault].caught_by), failed


@pytest.mark.parametrize("fault", ["worker-state", "nondeterministic"])
def test_a_fault_of_one_check_leaves_the_others_green(entry, fault):
    """worker-state and nondeterministic touch no serial output I1-I3 compare: only their check fails."""
    report = run_gate(entry, entry.defaults, fault=fault, timeout=60)
    assert [name for name, ok in verdicts(report).items() if not ok] == list(FAULTS[fault].caught_by)


def test_a_failing_line_names_row_output_index_values_and_distance(entry):
    report = run_gate(entry, entry.defaults, fault="batch-size", timeout=60)
    (i1,) = [c for c in report.output.checks if c.name == I1]
    assert i1.detail.startswith("row 0 output 'out' [0]: in batch=")
    assert "alone=" in i1.detail and "(1 ULP; called alone)" in i1.detail
    assert i1.detail.endswith("1536/1536 cells in 8 rows beyond 0 ULP")


def test_worker_state_names_the_worker(entry):
    report = run_gate(entry, entry.defaults, fault="worker-state", timeout=60)
    (i4,) = [c for c in report.output.checks if c.name == I4]
    assert "worker 0=" in i4.detail or "worker 1=" in i4.detail
    assert "pass 2" in i4.detail


def test_nondeterministic_names_the_repeated_call(entry):
    report = run_gate(entry, entry.defaults, fault="nondeterministic", timeout=60)
    (i5,) = [c for c in report.output.checks if c.name == I5]
    assert "call 1=" in i5.detail and "call 2=" in i5.detail and "rows 0..7 of 8" in i5.detail


def test_metrics_carry_a_compare_grads_histogram_per_output_and_check(entry):
    report = run_gate(entry, entry.defaults, fault="batch-size", timeout=60)
    reports = json.loads(json.dumps(report.output.metrics))["ulp_reports"]
    assert set(reports) == {"I1", "I2", "I3", "I4", "I5"}
    i1 = reports["I1"]["out"]
    # every cell 1 ULP off: in bucket 1, or a sign difference where -0.0 moved to the smallest positive float
    assert i1["histogram"]["1"] + i1["sign_differences"] == 1536 and i1["sign_differences"] > 0
    assert i1["histogram"] == {"0": 0, "1": i1["histogram"]["1"], "2-3": 0, "4-15": 0, "16+": 0}
    assert (i1["cells"], i1["differing_cells"], i1["failing_cells"], i1["max_ulps"]) == (1536, 1536, 1536, 1)
    assert i1["first_differing"][0]["row"] == 0 and i1["first_differing"][0]["ulps"] == 1
    assert reports["I5"]["out"]["differing_cells"] == 0


@pytest.mark.parametrize("ulp, green", [(0, False), (1, True)])
def test_ulp_sets_how_far_a_float_cell_may_move(entry, ulp, green):
    """batch-size moves every cell of a batched call by 1 ULP: beyond --ulp 0, within --ulp 1."""
    report = run_gate(entry, entry.defaults, fault="batch-size", options={"ulp": ulp}, timeout=60)
    assert report.error is None and report.passed is green
    assert report.output.metrics["ulp"] == ulp


def test_the_outputs_are_pinned_cell_by_cell(entry):
    clean = run_gate(entry, entry.defaults, timeout=60).output.fingerprints
    moved = run_gate(entry, entry.defaults, fault="batch-size", timeout=60).output.fingerprints
    assert set(clean) == {"output out"}
    assert clean["output out"]["sha256"] != moved["output out"]["sha256"]
    assert clean == run_gate(entry, entry.defaults, timeout=60).output.fingerprints


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_green_and_worker_state_caught_on_each_local_executor(entry, executor):
    params = {**entry.defaults, "executor": executor, "workers": 2}
    assert run_gate(entry, params, timeout=60).passed
    failed = {name for name, ok in verdicts(run_gate(entry, params, fault="worker-state", timeout=60)).items()
              if not ok}
    assert failed == {I4}


def test_a_larger_batch_is_sampled_and_still_green(entry):
    report = run_gate(entry, {**entry.defaults, "B": 40, "rows": 5}, timeout=60)
    assert report.passed
    (i1,) = [c for c in report.output.checks if c.name == I1]
    assert i1.detail.startswith("5 rows of 40 (seed 1) alone")


def test_a_moved_baseline_alone_is_named_not_blamed_on_the_target(entry):
    import copy

    from nxgates.baseline import session

    report = run_gate(entry, entry.defaults, timeout=60)
    doc_entry = session.entry_of(report)
    figures = copy.deepcopy(doc_entry["fingerprints"])
    figures["output out"]["sha256"] = "0" * 64
    session.add_check(report, {"entries": {session.key_of(report): {**doc_entry, "fingerprints": figures}}},
                      "base.json", "fail")
    assert report.verdict == ("INVARIANCE RED 5/5 -- every row's outputs independent of its batch, pool and call; "
                              "failed: baseline")
    planted = run_gate(entry, entry.defaults, fault="mate-leak", timeout=60)
    assert planted.verdict.startswith("INVARIANCE RED 2/5 -- a row's outputs depend on its batch")
