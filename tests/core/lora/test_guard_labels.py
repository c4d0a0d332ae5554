"""Which computation a lora overflow refusal names. A user reads ``int64 overflow guard tripped in WHAT`` to
know which operation would not have fit, so each guard's label is behaviour. Every test here builds a
1- or 2-row model by hand (Q20 integers chosen so that exactly one guard is the first to trip), runs the
real forward on it and calls the kernel that must refuse; at the seed's sizes none of these guards ever trips.
"""

import numpy as np
import pytest

from nxgates.core import lora as core_lora
from nxgates.core import q20
from nxgates.core.lora import fast as lora_fast
from nxgates.core.lora import gradcheck as lora_gradcheck
from nxgates.core.q20 import S
from tests.oracles.seed_lora import python_int_loss


def model(x, W, A, B) -> core_lora.Model:
    return core_lora.Model(*(np.array(v, dtype=np.int64) for v in (x, W, A, B)))


def refusal(call) -> q20.Q20Overflow:
    with pytest.raises(q20.Q20Overflow) as caught:
        call()
    return caught.value


def assert_names(exc: q20.Q20Overflow, what: str) -> None:
    assert exc.what == what
    assert str(exc).startswith(f"int64 overflow guard tripped in {what} (")


def seed_loss(m: core_lora.Model) -> int:
    """The seed's ``sum y^2`` in Python integers (which never wrap)."""
    return python_int_loss(*(v.tolist() for v in (m.x, m.W, m.A, m.B)))


# ---- forward and backward ------------------------------------------------------------------------------


def test_forward_names_h_at_b_when_a_huge_b_overflows_first():
    m = model(x=[[S]], W=[[S]], A=[[4 * S]], B=[[1 << 40]])  # h = 2^22: h*B = 2^62; x@W, x@A fit
    assert_names(refusal(lambda: core_lora.forward(m)), "h@B")


@pytest.mark.parametrize("x,W,A,B,what", [
    # h = 2^41, B = 0, y = xw = 2^31 (L = 2^62 fits): dy = 2^32 fits, h * dy = 2^73 does not
    ([[S]], [[1 << 31]], [[1 << 41]], [[0]], "dB = h^T dy"),
    # h = 1 (h*dy fits), y = 2^31 + 2^20: dy * B = 2^32 * 2^40 does not fit
    ([[S]], [[1 << 31]], [[1]], [[1 << 40]], "dh = dy B^T"),
    # x = 2^40, h = 2^20, y = 2^30 + 2^20: dh = 2^31 fits, x * dh = 2^71 does not
    ([[1 << 40]], [[1 << 10]], [[1]], [[S]], "dA = x^T dh"),
])
def test_backward_names_the_product_that_overflows_first(x, W, A, B, what):
    m = model(x, W, A, B)
    f = core_lora.forward(m)  # the forward fits: every refusal below is the backward's own
    assert f.loss == seed_loss(m)
    assert_names(refusal(lambda: core_lora.backward(m, f)), what)


# ---- the fast gradcheck's moved sums -------------------------------------------------------------------


def cancelling_model() -> core_lora.Model:
    """h@B = 3 * 2^60, cancelled by x@W, so y = 0 and L = 0 fit while the unrounded h@B is near the limit."""
    return model(x=[[S]], W=[[-(3 << 40)]], A=[[3 << 30]], B=[[1 << 30]])


def test_cells_a_names_h_at_b_moved_when_the_moved_sum_overflows():
    m = cancelling_model()
    f = core_lora.forward(m)
    assert (f.loss, int(f.acc_y[0, 0])) == (0, 3 << 60)
    out = np.zeros(m.A.shape, dtype=np.int64)
    # moving A by 2^31 moves h by 2^31: dh * B = 2^61 fits, h@B + dh * B = 5 * 2^60 does not
    exc = refusal(lambda: lora_fast.cells_a(m, f, 1 << 31, range(1), out, lambda n: None))
    assert_names(exc, "h@B moved")


def test_cells_a_names_dh_times_b_when_the_move_itself_overflows():
    m = cancelling_model()
    f = core_lora.forward(m)
    out = np.zeros(m.A.shape, dtype=np.int64)
    # moving A by 2^32 moves h by 2^32 (x * delta = 2^52 fits): dh * B = 2^32 * 2^30 = 2^62 does not
    exc = refusal(lambda: lora_fast.cells_a(m, f, 1 << 32, range(1), out, lambda n: None))
    assert_names(exc, "dh * B")


def test_cells_b_names_h_times_delta_even_where_a_passes_at_the_same_delta():
    m = model(x=[[S]], W=[[0]], A=[[1 << 30]], B=[[1]])  # h = 2^30, y = 2^10
    f = core_lora.forward(m)
    delta = 1 << 33
    out_a = np.zeros(m.A.shape, dtype=np.int64)
    lora_fast.cells_a(m, f, delta, range(1), out_a, lambda n: None)  # x * delta = 2^53: A's gradcheck fits
    out_b = np.zeros(m.B.shape, dtype=np.int64)
    exc = refusal(lambda: lora_fast.cells_b(m, f, delta, range(1), out_b))  # h * delta = 2^63
    assert_names(exc, "h * delta")


def test_cells_b_names_h_at_b_plus_h_delta_when_the_moved_sum_overflows():
    m = cancelling_model()  # h = 3 * 2^30: h * 2^29 fits, h@B + h * 2^29 = 9 * 2^59 does not
    f = core_lora.forward(m)
    out = np.zeros(m.B.shape, dtype=np.int64)
    assert_names(refusal(lambda: lora_fast.cells_b(m, f, 1 << 29, range(1), out)), "h@B + h*delta")


def moving_b_model(c: int, T: int = 1) -> core_lora.Model:
    """h = 1.0 on every row, B = 0, y = c on every row: moving B[0, 0] by delta moves each y by exactly delta."""
    return model(x=[[S]] * T, W=[[c]], A=[[S]], B=[[0]])


def test_loss_difference_names_the_product_when_it_overflows_first():
    m = moving_b_model(1 << 30)  # y = 2^30; moved by 2^30: yp = 2^31, ym = 0, L(+delta) = 2^62 fits
    f = core_lora.forward(m)
    out = np.zeros(m.B.shape, dtype=np.int64)
    # (yp - ym)(yp + ym) = 2^31 * 2^31
    assert_names(refusal(lambda: lora_fast.cells_b(m, f, 1 << 30, range(1), out)), "(yp - ym)(yp + ym)")


def test_loss_difference_names_the_sum_when_it_overflows_first():
    c = 759250125  # just above 2^29.5: each row's (2c)(2c) fits below 2^62, the two rows' sum does not
    assert 4 * c * c < q20.LIMIT <= 8 * c * c
    m = moving_b_model(c, T=2)
    f = core_lora.forward(m)
    out = np.zeros(m.B.shape, dtype=np.int64)
    assert_names(refusal(lambda: lora_fast.cells_b(m, f, c, range(1), out)), "Lp - Lm")


def test_the_tight_loss_bound_is_per_cell_not_over_all_cells():
    """Two cells of B, each with L(+delta) just below 2^63 (less the margin): both fit and are exact, though
    their moved squares summed over both cells would not fit."""
    c = 1 << 28
    delta = (1 << 31) - (1 << 22) - c  # y = c moves to c + delta = 2^31 - 2^22
    m = model(x=[[S, 0]], W=[[c, c], [0, 0]], A=[[S], [0]], B=[[0, 0]])  # h = 1.0, y = [c, c]
    f = core_lora.forward(m)
    moved_loss = f.loss - c * c + (c + delta) ** 2
    assert moved_loss < q20.SQUARES_LIMIT <= f.loss - c * c + 2 * (c + delta) ** 2
    out = np.zeros(m.B.shape, dtype=np.int64)
    lora_fast.cells_b(m, f, delta, range(1), out)
    expected = []
    for j in range(2):
        losses = []
        for moved in (delta, -delta):
            m.B[0, j] = moved
            losses.append(seed_loss(m))
        m.B[0, j] = 0
        expected.append(losses[0] - losses[1])
    assert out.tolist() == [expected]


# ---- judging ---------------------------------------------------------------------------------------------


def test_judge_names_num_minus_ana_when_the_difference_overflows():
    # num = -2^62 / 2 = -2^61 and ana = 2^61: num - ana reaches 2^62
    exc = refusal(lambda: lora_gradcheck.judge("A (lora)", np.array([1 << 61]), np.array([-(1 << 62)]), 1, 70))
    assert_names(exc, "num - ana")
