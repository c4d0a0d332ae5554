"""The tape's recorded pass: recording beside a tape's own records, replay once per key; replayed on the
next example's arrays it gives the bits of the pass built op by op, with any reduction and any relu
derivative; hooked examples run unrecorded; and a program refuses to replay what it could not replay exactly."""

import pickle

import numpy as np
import pytest

from nxgates.core.mlp import Dims, ExampleHooks, example_grads, init_data
from nxgates.core.program import Program
from nxgates.core.tape import F32, Tape
from nxgates.gates._tape_faults import ReluGradEverywhereTape


def f32(*values):
    return np.array(values, F32)


def squares(tape, x, out):
    """A pass: out = x * x, through the tape."""
    n = tape.leaf(x)
    sq = tape.mul(n, n)
    tape._do([(np.copyto, (out, tape.val(sq)))])
    return tape.val(sq)


def test_recording_leaves_the_tapes_own_records_and_programs_alone():
    tape = Tape(5)
    kept = tape.leaf(f32(7))
    tape.programs["other"] = "kept"
    x, out = f32(1, 2), np.empty(2, F32)
    program = tape.record(squares, x, out)
    assert tape.nodes == [kept] and tape.top == 1 and tape.programs == {"other": "kept"}
    assert tape._steps is None
    assert out.tolist() == [1, 4]
    x2, out2 = f32(3, 4), np.empty(2, F32)
    assert program.run(x2, out2).tolist() == [9, 16] and out2.tolist() == [9, 16]


def test_a_recorded_pass_starts_at_offset_0_of_the_same_arenas():
    tape = Tape(4)  # x and x*x: exactly the arena
    tape.leaf(f32(7, 7, 7))
    x, out = f32(1, 2), np.empty(2, F32)
    tape.record(squares, x, out)
    assert tape.vals.tolist() == [1, 2, 1, 4] and tape.top == 3


def test_a_recording_copy_is_of_the_tapes_own_class():
    class Marked(Tape):
        pass

    seen = []
    Marked(4).record(lambda tape, x: seen.append(type(tape)) or tape._do([(np.negative, (x, x))]), f32(1))
    assert seen == [Marked]


def test_replay_records_once_per_key_and_then_replays():
    tape = Tape(4)
    built = []

    def build(tape, x, out):
        built.append(1)
        return squares(tape, x, out)

    out = np.empty(2, F32)
    first = tape.replay("sq", build, f32(1, 2), out)
    assert first.tolist() == [1, 4] and out.tolist() == [1, 4]
    again = tape.replay("sq", build, f32(3, 5), out)
    assert again.tolist() == [9, 25] and out.tolist() == [9, 25] and len(built) == 1
    tape.replay("other", build, f32(1, 1), out)
    assert len(built) == 2 and set(tape.programs) == {"sq", "other"}
    assert tape.nodes == [] and tape.top == 0


def test_a_recording_keeps_every_zero_fill_of_an_unreached_gradient():
    tape = Tape(8)

    def build(tape, x, g):
        a = tape.leaf(x)
        unused = tape.leaf(x)
        tape.backward(tape.sum(a))
        tape._do([(np.copyto, (g, tape.grad(unused)))])
        return g

    g = np.full(2, 9, F32)
    program = tape.record(build, f32(1, 2), g)
    assert g.tolist() == [0, 0]
    tape.grads[...] = 9
    program.run(f32(3, 4), g)
    assert g.tolist() == [0, 0]


def left_to_right_sum(buf: np.ndarray, axis: int) -> np.ndarray:
    """Another reduction order (left to right), to show a replay sums as the recorded tape did."""
    v = np.moveaxis(buf, axis, 0)
    for k in range(1, v.shape[0]):
        np.add(v[:1], v[k : k + 1], out=v[:1])
    return v[0, ...]


def inputs_with_exact_zeros_in_h(dims: Dims, B: int):
    """The seed's weights and data, where example 1's input is 0.75 in two columns whose products cancel
    exactly in W1's first row (so h[0] is an exact 0.0 from non-zero products) and example 2's input is all
    zeros (so all of h is)."""
    w, x, t = init_data(dims, B)
    W1 = w[: dims.n_w1].reshape(dims.H, dims.D)
    j, k = next((j, k) for j in range(dims.D) for k in range(j + 1, dims.D)
                if W1[0, j] == -W1[0, k] != 0)
    x[1] = 0
    x[1, [j, k]] = F32(0.75)
    x[2] = 0
    assert (W1 @ x[1])[0] == 0
    return w, x, t


def unrecorded(tape: Tape, dims: Dims, w, x, t, w1_t=None) -> tuple[np.ndarray, np.ndarray]:
    """Every example's row and loss built op by op (a hook that does nothing keeps the pass unrecorded)."""
    rows = np.empty((x.shape[0], dims.n_params), F32)
    losses = np.array([example_grads(tape, dims, w, x[b], t[b], rows[b], hooks=ExampleHooks(), w1_t=w1_t)
                       for b in range(x.shape[0])], F32)
    return rows, losses


def replayed(tape: Tape, dims: Dims, w, x, t, w1_t=None) -> tuple[np.ndarray, np.ndarray]:
    rows = np.full((x.shape[0], dims.n_params), np.nan, F32)
    losses = np.array([example_grads(tape, dims, w, x[b], t[b], rows[b], w1_t=w1_t) for b in range(x.shape[0])],
                      F32)
    assert len(tape.programs) == 1 and not tape.nodes  # recorded once, and the tape keeps no graph
    return rows, losses


@pytest.mark.parametrize("dims", [Dims(5, 3, 2), Dims(13, 7, 3), Dims(8, 16, 4), Dims(64, 32, 5)], ids=str)
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("kind", [Tape, ReluGradEverywhereTape, "sequential"])
def test_a_replayed_pass_has_the_bits_of_the_pass_built_op_by_op(dims, transposed, kind):
    B = 6
    w, x, t = inputs_with_exact_zeros_in_h(dims, B)
    w1_t = np.ascontiguousarray(w[: dims.n_w1].reshape(dims.H, dims.D).T) if transposed else None

    def make() -> Tape:
        return Tape(dims.arena, reduce=left_to_right_sum) if kind == "sequential" else kind(dims.arena)

    want_rows, want_losses = unrecorded(make(), dims, w, x, t, w1_t)
    rows, losses = replayed(make(), dims, w, x, t, w1_t)
    assert rows.view(np.uint32).tolist() == want_rows.view(np.uint32).tolist()
    assert losses.view(np.uint32).tolist() == want_losses.view(np.uint32).tolist()


def test_each_reduction_and_relu_derivative_is_replayed_as_recorded():
    """The three tapes disagree somewhere, so the test above compares different passes, not one."""
    dims = Dims(64, 32, 5)
    w, x, t = init_data(dims, 4)
    rows = [replayed(tape, dims, w, x, t)[0].tobytes() for tape in
            (Tape(dims.arena), ReluGradEverywhereTape(dims.arena), Tape(dims.arena, reduce=left_to_right_sum))]
    assert len(set(rows)) == 3


def test_new_weights_and_rows_are_bound_anew_and_the_recorded_ones_are_left_alone():
    dims = Dims(5, 3, 2)
    w, x, t = inputs_with_exact_zeros_in_h(dims, 4)
    tape = Tape(dims.arena)
    first = np.empty(dims.n_params, F32)
    example_grads(tape, dims, w, x[0], t[0], first)
    kept = first.copy()
    w2 = w * F32(0.5)  # another step's weights, in another array
    here, there = np.empty(dims.n_params, F32), np.empty(dims.n_params, F32)
    example_grads(tape, dims, w2, x[3], t[3], here)
    example_grads(Tape(dims.arena), dims, w2, x[3], t[3], there, hooks=ExampleHooks())
    assert here.tobytes() == there.tobytes()
    assert first.tobytes() == kept.tobytes()


def test_a_hooked_example_runs_unrecorded_between_replays():
    dims = Dims(8, 16, 4)
    w, x, t = init_data(dims, 3)

    class Shift(ExampleHooks):
        calls = 0

        def after_hidden(self, tape, hidden):
            Shift.calls += 1
            tape.val(hidden)[...] += F32(0.25)

    tape = Tape(dims.arena)
    want, _ = unrecorded(Tape(dims.arena), dims, w, x, t)
    rows = np.empty((3, dims.n_params), F32)
    example_grads(tape, dims, w, x[0], t[0], rows[0])
    moved = np.empty(dims.n_params, F32)
    example_grads(tape, dims, w, x[1], t[1], moved, hooks=Shift())
    for b in (1, 2):
        example_grads(tape, dims, w, x[b], t[b], rows[b])
    assert Shift.calls == 1 and moved.tobytes() != want[1].tobytes()
    assert rows.tobytes() == want.tobytes()


def test_a_program_writes_into_the_arenas_its_tape_was_given():
    dims = Dims(5, 3, 2)
    w, x, t = init_data(dims, 2)
    vals, grads = np.zeros(dims.arena, F32), np.zeros(dims.arena, F32)
    tape = Tape(dims.arena, vals, grads)
    row = np.empty(dims.n_params, F32)
    for b in range(2):
        example_grads(tape, dims, w, x[b], t[b], row)
        assert vals[: dims.D].tobytes() == x[b].tobytes()  # the input leaf is copied first, at offset 0


def test_a_copied_tape_records_its_own_programs():
    dims = Dims(5, 3, 2)
    w, x, t = init_data(dims, 1)
    tape = Tape(dims.arena)
    example_grads(tape, dims, w, x[0], t[0], np.empty(dims.n_params, F32))
    assert tape.programs and not pickle.loads(pickle.dumps(tape)).programs


def test_a_program_refuses_what_it_could_not_replay_exactly():
    a, b, out = np.ones(3, F32), np.ones(3, F32), np.empty(3, F32)
    tape = Tape(8)

    def add(tape, a, b, out):
        np.add(a, b, out=out)  # not through the tape: nothing is recorded
        tape._do([(np.add, (a, b, out))])
        return out

    program = tape.record(add, a, b, out)
    assert program.run(np.full(3, 2, F32), b, out).tolist() == [3.0, 3.0, 3.0]
    with pytest.raises(ValueError, match="^a program replays only on arrays of the shapes and dtypes"):
        program.run(np.ones(4, F32), b, out)
    with pytest.raises(ValueError, match="^a program replays only on arrays of the shapes and dtypes"):
        program.run(a, b)
    with pytest.raises(ValueError, match=r"^bound arrays \[1\] reach no step$"):
        tape.record(lambda tape, a, b: tape._do([(np.negative, (a, a))]), a, b)
    with pytest.raises(ValueError, match="^step add reads a view of a bound array"):
        tape.record(lambda tape, a, out: tape._do([(np.add, (a[:2], a[1:], out[:2]))]), a, out)
    with pytest.raises(ValueError, match="^a pass cannot bind the same array twice$"):
        Program([(np.add, (a, a, out))], [a, a, out])
