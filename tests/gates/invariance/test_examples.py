"""examples/invariance/ under the gate: the row-loop MLP passes every check and fails each on its fault,
``X @ W`` fails I1 on this machine's BLAS, and the torch and JAX adapters pass where those are installed."""

import pytest

from nxgates.gates.invariance import CHECKS, FAULTS, I1, I2
from nxgates.runner import run_gate
from tests.gates.invariance.conftest import EXAMPLES

ROWLOOP = f"{EXAMPLES / 'mlp_rowloop.py'}:forward"
MLP_STATIC = {"static": "W1,b1,W2,b2"}


def verdicts(report):
    return {c.name: c.passed for c in report.output.checks}


def test_the_row_loop_mlp_passes_every_check(entry, mlp_arrays):
    report = run_gate(entry, {**entry.defaults, **MLP_STATIC}, options={"target": ROWLOOP, "inputs": mlp_arrays},
                      timeout=60)
    assert report.error is None and verdicts(report) == {name: True for name in CHECKS}
    outputs = report.output.metrics["outputs"]
    assert outputs == {"hidden": {"dtype": "float32", "shape": [16, 8]},
                       "logits": {"dtype": "float32", "shape": [16, 3]},
                       "label": {"dtype": "int64", "shape": [16]}}
    assert set(report.output.fingerprints) == {"output hidden", "output logits", "output label"}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_each_fault_planted_on_the_row_loop_mlp_fails_its_checks(entry, mlp_arrays, fault):
    report = run_gate(entry, {**entry.defaults, **MLP_STATIC}, fault=fault,
                      options={"target": ROWLOOP, "inputs": mlp_arrays}, timeout=60)
    assert report.error is None
    failed = {name for name, ok in verdicts(report).items() if not ok}
    assert failed >= set(FAULTS[fault].caught_by), failed


def test_the_row_loop_mlp_on_the_examples_own_inputs_file(entry, make_inputs, tmp_path):
    """The archive make_inputs.py writes, given as a path (read by the gate, keyed by the arrays' digest)."""
    assert make_inputs.main(["make_inputs.py", str(tmp_path)]) == 0
    options = {"target": ROWLOOP, "inputs": str(tmp_path / "mlp.npz")}
    report = run_gate(entry, {**entry.defaults, **MLP_STATIC, "rows": 4, "splits": "1,half"}, options=options,
                      timeout=60)
    assert report.passed, report.output.checks
    assert report.output.metrics["rows"] == 64 and len(report.output.metrics["inputs_sha256"]) == 64


def test_numpy_matmul_fails_i1_and_names_a_row(entry, make_inputs):
    """X @ W at B=64, D=784, H=256: OpenBLAS computes a lone row (GEMV) otherwise than the batch (GEMM)."""
    arrays = make_inputs.matmul_arrays()
    report = run_gate(entry, {**entry.defaults, "static": "W", "rows": 4, "splits": "1"},
                      options={"target": f"{EXAMPLES / 'matmul.py'}:forward", "inputs": arrays}, timeout=120)
    assert report.error is None
    checks = verdicts(report)
    assert not checks[I1] and not checks[I2]
    (i1,) = [c for c in report.output.checks if c.name == I1]
    assert i1.detail.startswith("row ") and " output 'out' [" in i1.detail and " ULP; called alone)" in i1.detail
    histogram = report.output.metrics["ulp_reports"]["I1"]["out"]
    assert histogram["failing_cells"] > histogram["cells"] // 2  # most cells of a lone row differ


def test_ulp_lets_floats_move_but_integers_stay_exact(entry, mlp_arrays):
    """batch-size moves every cell of a batched call by one step: within --ulp 1 for the float outputs, never
    for the integer label."""
    report = run_gate(entry, {**entry.defaults, **MLP_STATIC}, fault="batch-size",
                      options={"target": ROWLOOP, "inputs": mlp_arrays, "ulp": 1}, timeout=60)
    (i1,) = [c for c in report.output.checks if c.name == I1]
    assert not i1.passed and i1.detail.startswith("row 0 output 'label' [0]: ")
    assert "(exact compare; called alone)" in i1.detail
    per_output = report.output.metrics["ulp_reports"]["I1"]
    assert per_output["hidden"]["failing_cells"] == per_output["logits"]["failing_cells"] == 0
    assert per_output["hidden"]["differing_cells"] > 0
    assert per_output["label"]["failing_cells"] == per_output["label"]["exact_differences"] == 16


@pytest.mark.parametrize("adapter, module", [("torch_adapter.py", "torch"), ("jax_adapter.py", "jax")])
def test_a_framework_adapter_answers_the_contract(entry, mlp_arrays, adapter, module):
    pytest.importorskip(module, reason=f"{module} is not installed")
    report = run_gate(entry, {**entry.defaults, **MLP_STATIC},
                      options={"target": f"{EXAMPLES / adapter}:forward", "inputs": mlp_arrays}, timeout=300)
    assert report.error is None, report.error
    assert report.output.metrics["outputs"] == {"logits": {"dtype": "float32", "shape": [16, 3]}}
    failed = {name for name, ok in verdicts(run_gate(
        entry, {**entry.defaults, **MLP_STATIC}, fault="mate-leak",
        options={"target": f"{EXAMPLES / adapter}:forward", "inputs": mlp_arrays}, timeout=300)).items() if not ok}
    assert "I3 batch mates do not matter" in failed
