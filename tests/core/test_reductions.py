"""A reduction as numpy calls: the planned calls sum in exactly the function's order (same bits, every shape
and axis, odd lengths and signed zeros included), write into the array they are given, read the buffer when
they run, and a reduction with no plan is called as itself."""

import numpy as np
import pytest

from nxgates.core.kernels import run
from nxgates.core.reductions import sequential_sum, sum_calls, tree_sum

F32 = np.float32


def _bits(a):
    return np.asarray(a, F32).view(np.uint32).tolist()


def _values(shape, seed):
    """Values whose sums round differently in different orders, with exact and signed zeros among them."""
    rng = np.random.default_rng(seed)
    v = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)).astype(F32)
    v.reshape(-1)[::7] = 0
    v.reshape(-1)[3::11] = -0.0
    return v


@pytest.mark.parametrize("reduce", [tree_sum, sequential_sum], ids=["tree", "sequential"])
@pytest.mark.parametrize(("shape", "axis"), [((1,), 0), ((2,), 0), ((7,), 0), ((784,), 0), ((13, 5), 0), ((5, 13), 1),
                                             ((9, 3, 4), 1), ((4, 6, 9), 2), ((25, 10), 0), ((10, 25), 1)])
def test_the_calls_give_the_functions_bits(reduce, shape, axis):
    values = _values(shape, sum(shape) + axis)
    expected = reduce(values.copy(), axis)
    out = np.full(expected.shape, np.nan, F32)
    calls = sum_calls(reduce, values.copy(), axis, out)
    run(calls)
    assert _bits(out) == _bits(expected)


@pytest.mark.parametrize("reduce", [tree_sum, sequential_sum], ids=["tree", "sequential"])
def test_the_calls_read_the_buffer_each_time_they_run(reduce):
    """Made once, run on whatever the buffer holds then: a plan that read a value when it was made (a
    number, not a view) would repeat the first sum."""
    buf, out = np.empty(5, F32), np.empty((), F32)
    calls = sum_calls(reduce, buf, 0, out)
    for seed in range(3):
        values = _values(5, seed)
        buf[...] = values
        run(calls)
        assert _bits(out) == _bits(reduce(values.copy(), 0))


def test_the_tree_is_a_halving_step_per_level_the_last_written_into_out():
    buf, out = np.arange(1, 8, dtype=F32), np.empty((), F32)
    calls = sum_calls(tree_sum, buf, 0, out)
    assert [fn for fn, _ in calls] == [np.add, np.add, np.add]  # 7 -> 4 -> 2 -> 1
    assert calls[-1][1][2] is out
    run(calls)
    assert float(out) == 28.0


def test_a_single_term_is_copied_and_a_sequential_sum_decides_its_method_once():
    out = np.empty(3, F32)
    run(sum_calls(tree_sum, np.array([[1, -0.0, 2]], F32), 0, out))
    assert _bits(out) == _bits([1, -0.0, 2])
    rows = sum_calls(sequential_sum, np.ones((4, 3), F32), 0, np.empty(3, F32))  # summed axis not innermost
    inner = sum_calls(sequential_sum, np.ones((3, 4), F32), 1, np.empty(3, F32))  # innermost: accumulate
    assert len(rows) == 1 and [fn for fn, _ in inner] == [np.add.accumulate, np.add]


def test_a_reduction_without_a_plan_is_called_as_itself_when_the_calls_run():
    seen = []

    def spy(buf, axis):
        seen.append((buf.shape, axis))
        return tree_sum(buf, axis)

    buf, out = np.arange(6, dtype=F32).reshape(2, 3), np.empty(2, F32)
    calls = sum_calls(spy, buf, 1, out)
    assert seen == []  # planning asks nothing
    run(calls)
    assert seen == [((2, 3), 1)] and out.tolist() == [3.0, 12.0]


@pytest.mark.parametrize(("shape", "axis"), [((4, 3), 0), ((3, 4), 1), ((5,), 0)])
def test_a_planned_sequential_sum_of_negative_zeros_is_a_positive_zero(shape, axis):
    """As the loop (acc = +0.0f; acc += p[i]): by reduce from +0.0 or accumulate then + 0.0, never -0.0."""
    out = np.full(np.delete(np.array(shape), axis).tolist(), np.nan, F32)
    run(sum_calls(sequential_sum, np.full(shape, -0.0, F32), axis, out))
    assert not np.signbit(out).any() and not out.any()
