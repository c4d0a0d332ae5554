"""A recorded pass replayed on the next arrays: the same steps, with the bound arrays exchanged."""

import numpy as np
import pytest

from nxgates.core.program import Program, ReplayStep

F32 = np.float32


def _calls():
    """A kernel that logs what it was given."""
    log = []

    def kernel(*args):
        log.append(args)

    return kernel, log


def test_recording_keeps_the_steps_with_the_bound_arrays_taken_out():
    x, out, scratch = np.ones(3, F32), np.zeros(3, F32), np.zeros(3, F32)
    program = Program([(np.multiply, (x, 2.0, scratch)), (np.add, (scratch, x, out))], [x, out], result="r")
    assert program.signature == (((3,), np.dtype(F32)), ((3,), np.dtype(F32)))
    assert program.result == "r"
    assert [step.kernel for step in program.steps] == [np.multiply, np.add]
    assert program.steps[0].args == (None, 2.0, scratch)
    assert program.steps[0].slots == ((0, 0),)
    assert program.steps[1].args == (scratch, None, None)
    assert program.steps[1].slots == ((1, 0), (2, 1))
    assert all(isinstance(step, ReplayStep) for step in program.steps)


def test_a_replay_runs_every_step_in_order_on_the_new_arrays():
    x, out, scratch = np.ones(3, F32), np.zeros(3, F32), np.zeros(3, F32)
    program = Program([(np.multiply, (x, F32(2), scratch)), (np.add, (scratch, x, out))], [x, out], result=out)
    x2, out2 = np.array([1, 2, 3], F32), np.zeros(3, F32)
    assert program.run(x2, out2) is out
    assert out2.tolist() == [3.0, 6.0, 9.0]
    assert out.tolist() == [0.0, 0.0, 0.0]  # the recorded arrays are not touched
    assert x.tolist() == [1.0, 1.0, 1.0]


def test_steps_without_a_bound_array_are_called_with_their_recorded_arguments():
    kernel, log = _calls()
    fixed, x = np.zeros(2, F32), np.ones(2, F32)
    program = Program([(kernel, (fixed, 5)), (kernel, (x, "flag")), (kernel, ())], [x])
    x2 = np.full(2, 7, F32)
    assert program.run(x2) is None
    assert len(log) == 3
    assert log[0][0] is fixed and log[0][1] == 5 and len(log[0]) == 2
    assert log[1][0] is x2 and log[1][1] == "flag" and len(log[1]) == 2
    assert log[2] == ()
    program.run(x)
    assert log[4][0] is x


def test_every_run_gets_fresh_arguments():
    kernel, log = _calls()
    a, b = np.zeros(1, F32), np.zeros(2, F32)
    program = Program([(kernel, (a, 1, b))], [a, b])
    a1, b1, a2, b2 = np.ones(1, F32), np.ones(2, F32), np.full(1, 2, F32), np.full(2, 2, F32)
    program.run(a1, b1)
    program.run(a2, b2)
    assert [tuple(type(v).__name__ for v in args) for args in log] == [("ndarray", "int", "ndarray")] * 2
    assert log[0][0] is a1 and log[0][2] is b1 and log[1][0] is a2 and log[1][2] is b2
    assert program.steps[0].args == (None, 1, None)  # the recording itself is not overwritten


def test_a_replay_refuses_other_shapes_dtypes_or_counts():
    x, out = np.ones(3, F32), np.zeros(3, F32)
    program = Program([(np.add, (x, x, out))], [x, out])
    message = "^a program replays only on arrays of the shapes and dtypes it was recorded with$"
    for bad in [(np.ones(4, F32), out), (np.ones(3, np.float64), out), (x, np.zeros((3, 1), F32)), (x,),
                (x, out, out), (np.ones(3, np.int32), out)]:
        with pytest.raises(ValueError, match=message):
            program.run(*bad)
    program.run(np.ones(3, F32), np.zeros(3, F32))


def test_binding_the_same_array_twice_is_refused():
    a, out = np.ones(3, F32), np.zeros(3, F32)
    with pytest.raises(ValueError) as err:
        Program([(np.add, (a, a, out))], [a, a, out])
    assert str(err.value) == "a pass cannot bind the same array twice"


def test_a_bound_array_no_step_uses_is_refused_by_its_index():
    a, b, c, out = np.ones(3, F32), np.ones(3, F32), np.ones(3, F32), np.zeros(3, F32)
    with pytest.raises(ValueError) as err:
        Program([(np.add, (b, b, out))], [a, b, c, out])
    assert str(err.value) == "bound arrays [0, 2] reach no step"


def test_a_step_reading_a_view_of_a_bound_array_is_refused():
    a, out = np.ones(4, F32), np.zeros(4, F32)

    def double(src, dst):
        np.multiply(src, 2, out=dst)

    with pytest.raises(ValueError) as err:
        Program([(np.add, (a, a, out)), (double, (a, out[:2]))], [a, out])
    assert str(err.value) == "step double reads a view of a bound array (argument 1): pass the bound array itself"
    with pytest.raises(ValueError, match=r"^step double reads a view of a bound array \(argument 0\)"):
        Program([(np.add, (a, a, out)), (double, (a[1:], np.zeros(3, F32)))], [a, out])


def test_arrays_apart_from_the_bound_ones_and_other_arguments_are_kept():
    a, out, other = np.ones(4, F32), np.zeros(4, F32), np.ones(4, F32)
    program = Program([(np.add, (a, other, out)), (np.multiply, (out, 3, out))], [a, out])
    assert program.steps[0].args[1] is other
    out2 = np.zeros(4, F32)
    program.run(np.full(4, 2, F32), out2)
    assert out2.tolist() == [9.0] * 4


def test_the_ufunc_buffer_is_the_shortest_long_row_of_the_long_operations():
    from nxgates.core.program import DEFAULT_BUFFER, ufunc_buffer

    small, row = np.empty((4, 300), F32), np.empty(300, F32)
    assert ufunc_buffer([(np.multiply, (small, row, small))]) == DEFAULT_BUFFER  # 1200 cells: not long
    long_rows, longer_rows = np.empty((100, 300), F32), np.empty((40, 784), F32)
    assert ufunc_buffer([(np.multiply, (row, long_rows)), (np.add, (longer_rows, longer_rows))]) == 288  # 300 -> 16s
    assert ufunc_buffer([(np.add, (np.empty((2000, 30), F32), 1))]) == DEFAULT_BUFFER  # short rows: buffered is better
    assert ufunc_buffer([(np.add, (np.empty(100_000, F32), 1))]) == DEFAULT_BUFFER  # 1-d: nothing broadcast by rows
    assert ufunc_buffer([(np.add, (np.empty((64, 128), F32), 1))]) == 128
    assert ufunc_buffer([]) == DEFAULT_BUFFER
    # a row is the last axis: of a (4, 20, 512) array, rows of 512 (its middle axis of 20 would be short)
    assert ufunc_buffer([(np.add, (np.empty((4, 20, 512), F32), 1))]) == 512


def test_a_replay_runs_with_the_programs_buffer_and_gives_numpys_back():
    seen = []

    def look(_):
        seen.append(np.getbufsize())

    x = np.ones((64, 256), F32)
    program = Program([(look, (x,))], [x])
    assert program.buffer == 256
    before = np.getbufsize()
    program.run(np.ones((64, 256), F32))
    assert seen == [256] and np.getbufsize() == before

    def fail(_):
        raise RuntimeError("stop")

    failing = Program([(fail, (x,))], [x])
    with pytest.raises(RuntimeError):
        failing.run(x)
    assert np.getbufsize() == before
