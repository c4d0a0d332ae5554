"""The dp-train gate's fingerprint: every step's mean loss and weights (W1 and W2 by step, row and column),
the same on every executor and worker count; D1 and D2 name the first step and cell where two runs part,
each value as its float32 repr and raw bits."""

import re

import numpy as np
import pytest

from nxgates.core.mlp import Dims
from nxgates.gates import dp_train as dp
from nxgates.gates.dp_train.gate import cell_name, where_runs_part
from nxgates.gates.dp_train.training import TrainingRun
from tests.helpers import ctx

SEED = {"D": 8, "H": 16, "O": 4, "B": 8, "steps": 5, "lr_num": 1, "lr_den": 8, "workers": 2, "executor": "thread",
        "step_exp": 6, "tol_permil": 10, "d4_examples": 0}
DIMS = Dims(8, 16, 4)
#: one FLOAT32 (BITS): the value's shortest float32 repr, then its raw bits
VALUE = r"(\S+) \(0x([0-9a-f]{8})\)"


def test_the_figures_are_every_steps_loss_and_weights():
    out = dp.run(ctx(SEED))
    figures = out.fingerprints
    assert list(figures) == ["losses", "W1_steps", "W2_steps", "d4_worst_permil"]
    assert figures["losses"]["values"] == out.metrics["losses"] and figures["losses"]["dtype"] == "<f4"
    assert figures["W1_steps"]["shape"] == [5, 16, 8] and figures["W2_steps"]["shape"] == [5, 4, 16]
    assert figures["d4_worst_permil"] == out.metrics["d4_worst_permil"]


@pytest.mark.parametrize("executor, workers", [("thread", 3), ("process", 2)])
def test_every_executor_and_worker_count_pins_the_same_figures(executor, workers):
    again = dp.run(ctx({**SEED, "executor": executor, "workers": workers}))
    assert again.fingerprints == dp.run(ctx(SEED)).fingerprints


def assert_bits_match(text, bits):
    assert f"{int(np.float32(text).view(np.uint32)):08x}" == bits, (text, bits)


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_stale_weights_fail_d1_and_d2_naming_step_1_and_the_first_weight(executor):
    """Every weight moves from step 1 on (worker 1 used step 0's): the runs part at step 1, W1[0, 0]."""
    out = dp.run(ctx({**SEED, "executor": executor}, fault="stale-weights"))
    details = {c.name: c.detail for c in out.checks}
    for check, labels in ((dp.D1, ("serial", "2 workers")), (dp.D2, ("2 workers", "3 workers"))):
        m = re.fullmatch(f"{labels[0]} vs {labels[1]}: first part at step 1, W1\\[0, 0\\] {VALUE} vs {VALUE}; "
                         r"step 1: 192 cells, step 2: 192 cells, step 3: 192 cells, step 4: 192 cells",
                         details[check])
        assert m, details[check]
        assert_bits_match(m[1], m[2])
        assert_bits_match(m[3], m[4])
        assert m[2] != m[4]


def test_completion_order_fails_d1_naming_where_the_sums_part():
    out = dp.run(ctx(SEED, fault="completion-order"))
    detail = next(c.detail for c in out.checks if c.name == dp.D1)
    m = re.match(f"serial vs 2 workers: first part at step (\\d+), (W[12])\\[(\\d+), (\\d+)\\] {VALUE} vs {VALUE}; "
                 "step \\1: \\d+ cells", detail)
    assert m, detail
    assert_bits_match(m[5], m[6])
    assert_bits_match(m[7], m[8])
    assert m[6] != m[8]


def run_with(weights):
    return TrainingRun("serial", 0, weights=[np.array(w, np.float32) for w in weights])


def test_where_runs_part_names_the_first_differing_bits():
    w = np.zeros(DIMS.n_params, np.float32)
    w[DIMS.n_w1 + 5] = 0.1
    other = w.copy()
    other[DIMS.n_w1 + 5] = np.nextafter(np.float32(0.1), np.float32(1))
    assert where_runs_part(run_with([w, w]), run_with([w, other]), DIMS) == \
        "first part at step 1, W2[0, 5] 0.1 (0x3dcccccd) vs 0.10000001 (0x3dccccce)"
    signed = w.copy()
    signed[3] = -0.0  # equal as numbers, different bits
    assert where_runs_part(run_with([w]), run_with([signed]), DIMS) == \
        "first part at step 0, W1[0, 3] 0.0 (0x00000000) vs -0.0 (0x80000000)"


def test_cell_names_follow_the_weights_layout():
    assert [cell_name(DIMS, k) for k in (0, 7, 8, 127, 128, 143, 144, 191)] == [
        "W1[0, 0]", "W1[0, 7]", "W1[1, 0]", "W1[15, 7]", "W2[0, 0]", "W2[0, 15]", "W2[1, 0]", "W2[3, 15]"]


def test_the_injected_fault_prints_where_the_runs_part(invoke):
    r = invoke("run", "dp-train", "--inject", "stale-weights", "--set", "workers=2", "-q")
    assert r.exit_code == 1
    d1 = next(line for line in r.stdout.splitlines() if line.startswith(f" FAIL {dp.D1} -- "))
    assert re.fullmatch(f" FAIL {re.escape(dp.D1)} -- serial vs 2 workers: first part at step 1, W1\\[0, 0\\] "
                        f"{VALUE} vs {VALUE}; step 1: 192 cells, .*", d1), d1
