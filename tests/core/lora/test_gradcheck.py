"""The lora gradcheck's verdict per cell and the seed's own algorithm (a whole forward per perturbation)."""

import numpy as np
import pytest

from nxgates.core import lora as core_lora
from nxgates.core import q20
from nxgates.core.lora import fast, gradcheck
from nxgates.core.lora.model import Model
from nxgates.gatekit import Progress, RunContext

DELTA = 2097  #: the seed's DELTA
#: L(+delta) - L(-delta) per cell of A and of B at the seed's sizes (T=3 DM=6 R=2)
SEED_DIFFS_A = [-740240911, -225973818, 84702592, 486471633, -758139281, -177813583, 65613578, 533226098,
                -779583948, -129188083, 600677323, -596756630]
SEED_DIFFS_B = [753920142, -928990447, -249543117, -1260309084, -850517391, -973038638, -389550364, 245311453,
                -51983796, 1541997211, 609007297, 1326506800]


class Counting(Progress):
    def __init__(self) -> None:
        self.done = 0

    def advance(self, steps: int = 1) -> None:
        self.done += steps


class CountingContext(RunContext):
    """A run context that counts its progress and its deadline checks."""

    def __init__(self) -> None:
        super().__init__(params={}, progress=Counting())
        self.checks = 0

    def check_time(self) -> None:
        self.checks += 1


def _seed():
    m = core_lora.init_model(3, 6, 2)
    return m, core_lora.forward(m)


def test_judge_truncates_num_and_rel_toward_zero():
    ana = np.array([[10, -20], [0, 30]], dtype=np.int64)
    diffs = np.array([[61, -125], [7, -5]], dtype=np.int64)  # / 6: 10, -20 (-20.8), 1, 0 (-0.8)
    g = gradcheck.judge("X", ana, diffs, 3, 40)
    assert g.name == "X"
    assert g.analytic.tolist() == [10, -20, 0, 30]
    assert g.numeric.tolist() == [10, -20, 1, 0]
    assert g.maxabs == 30
    assert g.rel.tolist() == [0, 0, 33, 1000]  # 1000 // 30, 30000 // 30
    assert g.tol_permil == 40
    assert (g.cells, g.n_pass, g.worst, g.passed) == (4, 3, 1000, False)


def test_a_cell_passes_at_exactly_the_tolerance():
    ana = np.array([100, 0], dtype=np.int64)
    diffs = np.array([200, 4], dtype=np.int64)  # num 100 and 2: rel 0 and 20
    assert gradcheck.judge("X", ana, diffs, 1, 20).n_pass == 2
    assert gradcheck.judge("X", ana, diffs, 1, 19).n_pass == 1
    ok = gradcheck.judge("X", ana, np.array([200, 0]), 1, 0)
    assert (ok.rel.tolist(), ok.n_pass, ok.passed, ok.worst) == ([0, 0], 2, True, 0)


def test_rel_is_measured_against_the_largest_analytic_magnitude():
    ana = np.array([-400, 200], dtype=np.int64)
    g = gradcheck.judge("X", ana, np.array([-800 + 2 * 3, 2 * 200]), 1, 10)
    assert g.maxabs == 400
    assert g.numeric.tolist() == [-397, 200]
    assert g.rel.tolist() == [7, 0]  # 3000 // 400


def test_zero_gradients_are_judged_against_one():
    g = gradcheck.judge("X", np.zeros(3, np.int64), np.array([0, 4, -4]), 1, 0)
    assert g.maxabs == 1
    assert g.rel.tolist() == [0, 2000, 2000]
    assert g.worst == 2000


def test_an_empty_tensor_has_no_cells_and_passes():
    g = gradcheck.judge("X", np.zeros((0, 2), np.int64), np.zeros((0, 2), np.int64), 1, 0)
    assert (g.maxabs, g.cells, g.n_pass, g.worst, g.passed) == (1, 0, 0, 0, True)


def test_judge_refuses_num_minus_ana_beyond_the_guard():
    with pytest.raises(q20.Q20Overflow, match=r"^int64 overflow guard tripped in num - ana \("):
        gradcheck.judge("X", np.array([1 << 61]), np.array([-(1 << 62)]), 1, 0)


def test_judge_refuses_the_permil_product_beyond_the_guard():
    with pytest.raises(q20.Q20Overflow, match=r"^int64 overflow guard tripped in \|num - ana\| \* 1000 \("):
        gradcheck.judge("X", np.array([1 << 53]), np.array([0]), 1, 0)


def test_naive_diffs_are_the_seeds_and_leave_the_tensor_as_it_was():
    m, _ = _seed()
    a_before, b_before = m.A.copy(), m.B.copy()
    c = CountingContext()
    assert gradcheck.diffs_naive(m, m.A, DELTA, c).tolist() == SEED_DIFFS_A
    assert gradcheck.diffs_naive(m, m.B, DELTA, c).tolist() == SEED_DIFFS_B
    assert np.array_equal(m.A, a_before) and np.array_equal(m.B, b_before)
    assert c.progress.done == 24
    assert c.checks == 0  # fewer than 64 cells each


def test_naive_diffs_are_central_differences_of_whole_forwards():
    m = core_lora.init_model(2, 3, 1)
    base = m.A.copy()
    out = gradcheck.diffs_naive(m, m.A, 5, RunContext(params={}))
    for i in range(3):
        plus, minus = base.copy(), base.copy()
        plus[i, 0] += 5
        minus[i, 0] -= 5
        lp = core_lora.forward(Model(m.x, m.W, plus, m.B)).loss
        lm = core_lora.forward(Model(m.x, m.W, minus, m.B)).loss
        assert out[i] == lp - lm
    assert out.dtype == np.int64 and out.shape == (3,)


def test_naive_diffs_check_the_deadline_every_64_cells():
    m = core_lora.init_model(1, 192, 1)  # A has 192 cells: checks after cells 64, 128 and 192
    c = CountingContext()
    gradcheck.diffs_naive(m, m.A, 3, c)
    assert c.checks == 3
    assert c.progress.done == 192
    m = core_lora.init_model(1, 191, 1)
    c = CountingContext()
    gradcheck.diffs_naive(m, m.A, 3, c)
    assert c.checks == 2


def test_naive_diffs_refuse_a_loss_difference_beyond_the_guard():
    """Each moved loss fits int64, but L(+d) + L(-d) reaches 2^63: the seed's Lp - Lm is guarded."""
    one = np.ones((1, 1), np.int64)
    m = Model(x=one << 30, W=one << 21, A=0 * one, B=0 * one)  # y = 2^31, L = 2^62
    with pytest.raises(q20.Q20Overflow, match=r"^int64 overflow guard tripped in Lp - Lm \("):
        gradcheck.diffs_naive(m, m.A, 1, RunContext(params={}))


def _spies(monkeypatch):
    calls = []

    def naive(m, tensor, delta, ctx):
        calls.append(("naive", m, tensor, delta, ctx))
        return np.full(tensor.shape, len(calls), np.int64)

    def fast_a(m, f, delta, ctx):
        calls.append(("fast_a", m, f, delta, ctx))
        return np.full(m.A.shape, 10, np.int64)

    def fast_b(m, f, delta, ctx):
        calls.append(("fast_b", m, f, delta, ctx))
        return np.full(m.B.shape, 20, np.int64)

    monkeypatch.setattr(gradcheck, "diffs_naive", naive)
    monkeypatch.setattr(fast, "diffs_fast_a", fast_a)
    monkeypatch.setattr(fast, "diffs_fast_b", fast_b)
    return calls


def test_adapter_diffs_by_the_seeds_algorithm(monkeypatch):
    calls = _spies(monkeypatch)
    m, f = _seed()
    c = RunContext(params={})
    a, b = gradcheck.adapter_diffs(m, f, 7, c, "naive")
    assert calls == [("naive", m, m.A, 7, c), ("naive", m, m.B, 7, c)]
    assert (a.tolist(), b.shape, int(b[0, 0])) == (np.full((6, 2), 1).tolist(), (2, 6), 2)


def test_adapter_diffs_by_the_fast_algorithm(monkeypatch):
    calls = _spies(monkeypatch)
    m, f = _seed()
    c = RunContext(params={})
    a, b = gradcheck.adapter_diffs(m, f, 7, c, "fast")
    assert calls == [("fast_a", m, f, 7, c), ("fast_b", m, f, 7, c)]
    assert (int(a[0, 0]), a.shape, int(b[0, 0]), b.shape) == (10, (6, 2), 20, (2, 6))


def test_gradcheck_adapter_is_fast_unless_asked(monkeypatch):
    calls = _spies(monkeypatch)
    m, f = _seed()
    c = RunContext(params={})
    grads = (np.full((6, 2), 5, np.int64), np.full((2, 6), 7, np.int64))
    ga, gb = gradcheck.gradcheck_adapter(m, f, grads, 1, 300, c)
    assert [x[0] for x in calls] == ["fast_a", "fast_b"]
    assert (ga.name, gb.name) == gradcheck.NAMES == ("A (lora)", "B (lora)")
    assert ga.numeric.tolist() == [5] * 12 and gb.numeric.tolist() == [10] * 12
    assert ga.analytic.tolist() == [5] * 12 and gb.analytic.tolist() == [7] * 12
    assert (ga.rel.tolist(), ga.maxabs, ga.tol_permil) == ([0] * 12, 5, 300)
    assert (gb.rel.tolist()[0], gb.maxabs, gb.tol_permil, gb.passed) == (428, 7, 300, False)


def test_gradcheck_adapter_by_the_seeds_algorithm_when_asked(monkeypatch):
    calls = _spies(monkeypatch)
    m, f = _seed()
    grads = (np.zeros((6, 2), np.int64), np.zeros((2, 6), np.int64))
    gradcheck.gradcheck_adapter(m, f, grads, 1, 0, RunContext(params={}), "naive")
    assert [x[0] for x in calls] == ["naive", "naive"]


def test_gradcheck_adapter_at_the_seed_size():
    m, f = _seed()
    grads = core_lora.backward(m, f)
    for algorithm in ("naive", "fast"):
        ga, gb = gradcheck.gradcheck_adapter(m, f, grads, DELTA, 70, RunContext(params={}), algorithm)
        assert (ga.n_pass, ga.worst, ga.maxabs) == (12, 2, 185888)
        assert (gb.n_pass, gb.worst, gb.maxabs) == (12, 0, 367790)
        assert ga.numeric.tolist()[:3] == [-176499, -53880, 20196]
        assert gb.numeric.tolist()[-3:] == [367667, 145209, 316286]


def test_gradcheck_adapter_refuses_grads_of_the_wrong_count():
    m, f = _seed()
    with pytest.raises(ValueError):
        gradcheck.gradcheck_adapter(m, f, core_lora.backward(m, f)[:1], DELTA, 70, RunContext(params={}))


def test_first_unresolved_names_a_failed_tensor_within_the_rounding_and_nothing_else():
    from types import SimpleNamespace

    from nxgates.core import lora
    from nxgates.core.lora.gradcheck import SEED_DELTA, first_unresolved

    m = lora.init_model(3, 6, 2)
    f = lora.forward(m)
    grads = lora.backward(m, f)
    failed, passed = SimpleNamespace(passed=False), SimpleNamespace(passed=True)
    widest = max(sum(abs(v) for v in row) for row in f.y.tolist())
    rounding = 2 * widest // SEED_DELTA + 1
    largest_b = int(abs(grads[1]).max())
    assert first_unresolved(f, grads, [passed, passed], SEED_DELTA, 10**9) is None  # nothing failed
    assert first_unresolved(f, grads, [passed, failed], SEED_DELTA, 1) is None  # B resolved: its FAIL stands
    bad = first_unresolved(f, grads, [passed, failed], SEED_DELTA, largest_b // rounding + 1)
    assert bad == ("B", largest_b, rounding)
    # a step finer than the seed's keeps the seed's rounding (its FAIL is the user's choice), a coarser one less
    assert first_unresolved(f, grads, [passed, failed], 1, largest_b // rounding + 1) == bad
    assert first_unresolved(f, grads, [passed, failed], 100 * SEED_DELTA, largest_b // rounding + 1) is None
