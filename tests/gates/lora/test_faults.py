"""The exact effect of each planted fault of the lora gate, as its table describes it."""


import numpy as np
import pytest

from nxgates.core import lora as core_lora
from nxgates.core.q20 import S
from nxgates.gates.lora import gate as lora_gate
from tests.helpers import ODD, checks, ctx
from tests.oracles.seed_lora import cdiv

# ---- the planted faults do exactly what their table says -----------------------------------------------


def analytic(out, key):
    return out.metrics[key]["analytic"]


@pytest.mark.parametrize("size", [(2, 5, 2), (3, 6, 2)])  # cell 0 of A positive, then negative
def test_grad_bug_moves_one_cell_of_a_by_a_tenth_of_max_grad(size):
    params = {**ODD, "T": size[0], "DM": size[1], "R": size[2]}
    clean, bug = lora_gate.run(ctx(params)), lora_gate.run(ctx(params, fault="grad-bug"))
    want = analytic(clean, "A").copy()
    want[0] += max(abs(v) for v in want) // 10
    assert analytic(bug, "A") == want
    assert analytic(bug, "B") == analytic(clean, "B")


def test_grad_bug_moves_a_cell_by_one_when_every_gradient_is_tiny():
    m = core_lora.init_model(1, 1, 1)
    f = core_lora.forward(m)
    dA, _ = core_lora.backward(m, f)
    bugged, _ = lora_gate.planted_gradients("grad-bug", f, *core_lora.backward(m, f))
    assert int(bugged[0, 0]) - int(dA[0, 0]) == max(1, abs(int(dA[0, 0])) // 10)


def test_missing_rescale_leaves_one_product_of_db_undivided():
    m = core_lora.init_model(2, 5, 2)
    f = core_lora.forward(m)
    _, dB = core_lora.backward(m, f)
    _, bad = lora_gate.planted_gradients("missing-rescale", f, *core_lora.backward(m, f))
    term = int(f.h[0, 0]) * 2 * int(f.y[0, 0])
    want = dB.copy()
    want[0, 0] += term - cdiv(term, S)
    assert bad.tolist() == want.tolist()
    out = lora_gate.run(ctx(ODD, fault="missing-rescale"))
    assert [c.passed for c in out.checks] == [True, False, True]


def test_transposed_b_writes_db_with_swapped_indices():
    m = core_lora.init_model(2, 5, 2)
    f = core_lora.forward(m)
    _, dB = core_lora.backward(m, f)
    _, bad = lora_gate.planted_gradients("transposed-b", f, *core_lora.backward(m, f))
    assert bad.shape == dB.shape
    assert bad.reshape(-1).tolist() == dB.T.reshape(-1).tolist()


def test_train_base_reports_how_many_cells_of_w_moved():
    out = lora_gate.run(ctx(ODD, fault="train-base"))
    assert checks(out)[lora_gate.CHECK_FROZEN] == (False, "1 of 25 cells of W changed during the run")
    assert out.red.startswith("NX-INTFP-LORA verdict=RED 20/20")


def test_train_base_at_the_smallest_size_moves_the_only_cell():
    out = lora_gate.run(ctx({**ODD, "DM": 1, "R": 1}, fault="train-base"))
    assert checks(out)[lora_gate.CHECK_FROZEN] == (False, "1 of 1 cells of W changed during the run")


@pytest.mark.parametrize("shrink", [1, 128])
def test_grad_bug_moves_one_cell_of_a_by_a_tenth_of_max_grad_and_at_least_one(shrink):
    """x // 128 leaves max|dA| = 11: a tenth rounds to 1, and 1 is the smallest defect an integer has."""
    base = core_lora.init_model(3, 6, 2)
    m = core_lora.Model(base.x // shrink, base.W, base.A, base.B)
    f = core_lora.forward(m)
    clean, _ = core_lora.backward(m, f)
    bugged, _ = lora_gate.planted_gradients("grad-bug", f, *core_lora.backward(m, f))
    biggest = int(np.max(np.abs(clean)))
    shift = bugged - clean
    assert np.count_nonzero(shift) == 1
    assert shift[0, 0] == max(1, biggest // 10)
