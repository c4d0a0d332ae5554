"""The MLP builder: its declared parameters, the seed's formulas for weights and data, and one example's
forward and backward on the tape (against a float64 reference, replayed or hooked)."""

import threading

import numpy as np
import pytest

from nxgates.core.mlp import (
    Dims,
    ExampleHooks,
    MlpInputs,
    example_grads,
    init_data,
    init_examples,
    init_weights,
    reduction_of,
)
from nxgates.core.tape import F32, Tape, sequential_sum, tree_sum


def f32_formula(values, d):
    """``float32(n) / float32(d)`` for each n, written out without the tape's helpers."""
    return np.array([np.float32(v) / np.float32(d) for v in values], dtype=np.float32)


def test_what_the_reduction_param_chooses():
    assert reduction_of({}) is tree_sum
    assert reduction_of({"reduction": "tree"}) is tree_sum
    assert reduction_of({"reduction": "sequential"}) is sequential_sum
    with pytest.raises(KeyError):
        reduction_of({"reduction": "other"})


# ---- sizes --------------------------------------------------------------------------------------------------


def test_dims_from_params_and_what_they_size():
    dims = Dims.of({"D": 2, "H": 3, "O": 5, "B": 7})
    assert (dims.D, dims.H, dims.O) == (2, 3, 5)
    assert dims.n_w1 == 6
    assert dims.n_params == 6 + 15
    assert dims.arena == 2 + 2 * 3 + 2 * 5 + 1


def test_dims_are_frozen_values():
    assert Dims(1, 2, 3) == Dims(1, 2, 3) and hash(Dims(1, 2, 3)) == hash(Dims(1, 2, 3))
    with pytest.raises(AttributeError):
        Dims(1, 2, 3).D = 4


# ---- data ---------------------------------------------------------------------------------------------------


def test_the_seed_weights_are_the_ta_constf_formula():
    dims = Dims(2, 3, 2)
    w = init_weights(dims)
    assert w.dtype == F32 and w.shape == (12,)
    want = f32_formula([((i * 7 + 1) % 13) - 6 for i in range(12)], 8)
    assert np.array_equal(w.view(np.uint32), want.view(np.uint32))
    assert w[0] == F32(-5) / F32(8) and w[1] == F32(2) / F32(8)


def test_the_seed_examples_are_the_ta_constf_formulas():
    dims = Dims(3, 2, 2)
    x, t = init_examples(dims, 0, 4)
    assert x.shape == (4, 3) and t.shape == (4, 2) and x.dtype == F32 and t.dtype == F32
    want_x = f32_formula([((i * 5 + 2) % 11) - 5 for i in range(12)], 7).reshape(4, 3)
    want_t = f32_formula([((i * 3 + 1) % 9) - 4 for i in range(8)], 6).reshape(4, 2)
    assert np.array_equal(x, want_x) and np.array_equal(t, want_t)


def test_a_chunk_of_examples_is_those_rows_of_the_whole_batch():
    dims = Dims(3, 2, 4)
    x, t = init_examples(dims, 0, 7)
    for first, stop in ((0, 1), (2, 5), (6, 7), (1, 7)):
        cx, ct = init_examples(dims, first, stop)
        assert np.array_equal(cx, x[first:stop]) and np.array_equal(ct, t[first:stop])


def test_init_data_is_the_weights_and_the_first_b_examples():
    dims = Dims(2, 3, 2)
    w, x, t = init_data(dims, 3)
    assert np.array_equal(w, init_weights(dims))
    ex, et = init_examples(dims, 0, 3)
    assert np.array_equal(x, ex) and np.array_equal(t, et)


def given_inputs(dims: Dims, B: int) -> MlpInputs:
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(shape).astype(F32) for shape in ((dims.H, dims.D), (dims.O, dims.H), (B, dims.D),
                                                                   (B, dims.O))]
    return MlpInputs(*arrays)


def test_given_arrays_replace_the_formulas():
    dims = Dims(2, 3, 2)
    given = given_inputs(dims, 4)
    w = init_weights(dims, given)
    assert np.array_equal(w, np.concatenate([given.W1.ravel(), given.W2.ravel()]))
    x, t = init_examples(dims, 1, 3, given)
    assert np.array_equal(x, given.X[1:3]) and np.array_equal(t, given.T[1:3])
    w2, x2, t2 = init_data(dims, 2, given)
    assert np.array_equal(w2, w) and np.array_equal(x2, given.X[:2]) and np.array_equal(t2, given.T[:2])


def test_mlp_inputs_of_a_run_options():
    assert MlpInputs.of({}) is None
    assert MlpInputs.of({"inputs": None}) is None
    arrays = {"W1": np.zeros((1, 1), F32), "W2": np.ones((1, 1), F32), "X": np.full((1, 1), 2, F32),
              "T": np.full((1, 1), 3, F32)}
    got = MlpInputs.of({"inputs": arrays})
    assert got.W1 is arrays["W1"] and got.W2 is arrays["W2"] and got.X is arrays["X"] and got.T is arrays["T"]


# ---- one example's pass --------------------------------------------------------------------------------------


def reference(dims: Dims, w, x, t):
    """The MLP's loss and [dW1, dW2] in float64."""
    W1 = w[: dims.n_w1].astype(np.float64).reshape(dims.H, dims.D)
    W2 = w[dims.n_w1 :].astype(np.float64).reshape(dims.O, dims.H)
    x, t = x.astype(np.float64), t.astype(np.float64)
    h = W1 @ x
    a = np.maximum(h, 0)
    y = W2 @ a
    loss = np.mean((y - t) ** 2)
    dy = 2 * (y - t) / dims.O
    dW2 = np.outer(dy, a)
    dh = (W2.T @ dy) * (h > 0)
    dW1 = np.outer(dh, x)
    return loss, np.concatenate([dW1.ravel(), dW2.ravel()])


def examples(dims: Dims, B: int, seed: int = 5):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(dims.n_params).astype(F32)
    x = rng.standard_normal((B, dims.D)).astype(F32)
    t = rng.standard_normal((B, dims.O)).astype(F32)
    return w, x, t


@pytest.mark.parametrize("dims", [Dims(3, 4, 2), Dims(1, 1, 1), Dims(5, 2, 3)])
def test_example_grads_match_a_float64_reference(dims):
    w, x, t = examples(dims, 4)
    tape = Tape(dims.arena)
    for b in range(4):
        out = np.full(dims.n_params, np.nan, F32)
        loss = example_grads(tape, dims, w, x[b], t[b], out)
        want_loss, want = reference(dims, w, x[b], t[b])
        assert type(loss) is np.float32
        assert loss == pytest.approx(want_loss, rel=1e-5, abs=1e-6)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_example_grads_on_the_seed_data():
    dims = Dims(3, 4, 2)
    w, x, t = init_data(dims, 2)
    tape = Tape(dims.arena)
    for b in range(2):
        out = np.empty(dims.n_params, F32)
        loss = example_grads(tape, dims, w, x[b], t[b], out)
        want_loss, want = reference(dims, w, x[b], t[b])
        assert loss == pytest.approx(want_loss, rel=1e-5)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-6)


def bits(a):
    return np.asarray(a, F32).view(np.uint32)


def test_a_replay_a_hooked_pass_and_a_transposed_w1_give_the_same_bits():
    dims = Dims(4, 3, 2)
    w, x, t = examples(dims, 3)
    w1_t = np.ascontiguousarray(w[: dims.n_w1].reshape(dims.H, dims.D).T)
    runs = {}
    for how in ("replay", "hooked", "transposed"):
        tape = Tape(dims.arena)
        got = []
        for b in range(3):
            out = np.empty(dims.n_params, F32)
            loss = example_grads(tape, dims, w, x[b], t[b], out, hooks=ExampleHooks() if how == "hooked" else None,
                                 w1_t=w1_t if how == "transposed" else None)
            got.append((bits(loss).tolist(), bits(out).tolist()))
        runs[how] = got
    assert runs["replay"] == runs["hooked"] == runs["transposed"]


def test_a_tape_keeps_one_program_per_shape_and_transposition():
    dims = Dims(2, 3, 2)
    w, x, t = examples(dims, 2)
    w1_t = np.ascontiguousarray(w[: dims.n_w1].reshape(dims.H, dims.D).T)
    tape = Tape(dims.arena)
    out_plain, out_t = np.empty(dims.n_params, F32), np.empty(dims.n_params, F32)
    for b in range(2):
        example_grads(tape, dims, w, x[b], t[b], out_plain)
        example_grads(tape, dims, w, x[b], t[b], out_t, w1_t=w1_t)
        assert np.array_equal(bits(out_plain), bits(out_t))
    assert set(tape.programs) == {("mlp", dims, False), ("mlp", dims, True)}
    # with W1.T given the pass reads it in W1's place: x, t, W1.T, W2, dW1, dW2
    assert [shape for shape, _ in tape.programs[("mlp", dims, True)].signature] == [(2,), (2,), (2, 3), (2, 3),
                                                                                     (3, 2), (2, 3)]
    assert [shape for shape, _ in tape.programs[("mlp", dims, False)].signature] == [(2,), (2,), (3, 2), (2, 3),
                                                                                      (3, 2), (2, 3)]


def test_the_replayed_pass_writes_into_the_given_out_and_reads_the_given_example():
    dims = Dims(3, 2, 2)
    w, x, t = examples(dims, 2)
    tape = Tape(dims.arena)
    first, second = np.empty(dims.n_params, F32), np.empty(dims.n_params, F32)
    example_grads(tape, dims, w, x[0], t[0], first)
    kept = first.copy()
    example_grads(tape, dims, w, x[1], t[1], second)
    assert np.array_equal(first, kept)  # the second example did not write into the first's row
    np.testing.assert_allclose(second, reference(dims, w, x[1], t[1])[1], rtol=1e-4, atol=1e-6)


class Recording(ExampleHooks):
    def __init__(self, tape_of_interest=None, nudge=0.0):
        self.calls = []
        self.nudge = nudge

    def after_hidden(self, tape, hidden):
        self.calls.append(("after_hidden", tape.val(hidden).copy()))
        tape.val(hidden)[...] += F32(self.nudge)

    def before_backward(self):
        self.calls.append(("before_backward", None))


def test_hooks_see_the_hidden_pre_activation_then_the_end_of_the_forward():
    dims = Dims(3, 4, 2)
    w, x, t = examples(dims, 1)
    tape = Tape(dims.arena)
    hooks = Recording()
    out = np.empty(dims.n_params, F32)
    example_grads(tape, dims, w, x[0], t[0], out, hooks=hooks)
    assert [name for name, _ in hooks.calls] == ["after_hidden", "before_backward"]
    W1 = w[: dims.n_w1].astype(np.float64).reshape(dims.H, dims.D)
    np.testing.assert_allclose(hooks.calls[0][1], W1 @ x[0].astype(np.float64), rtol=1e-5)
    assert tape.nodes == [] and tape.top == 0  # the hooked pass's records are dropped
    assert tape.programs == {}  # and nothing was recorded for replay


def test_a_hook_that_changes_the_hidden_layer_changes_the_gradients():
    dims = Dims(3, 4, 2)
    w, x, t = examples(dims, 1)
    plain, nudged = np.empty(dims.n_params, F32), np.empty(dims.n_params, F32)
    loss = example_grads(Tape(dims.arena), dims, w, x[0], t[0], plain, hooks=Recording())
    moved = example_grads(Tape(dims.arena), dims, w, x[0], t[0], nudged, hooks=Recording(nudge=0.5))
    assert loss != moved and not np.array_equal(plain, nudged)


def test_a_gradient_that_nothing_reaches_is_zero():
    """Every hidden unit off (W1 x < 0): relu passes nothing back, so dW1 is all zeros."""
    dims = Dims(2, 3, 2)
    w = np.concatenate([np.full(dims.n_w1, -1, F32), np.ones(dims.n_params - dims.n_w1, F32)])
    x, t = np.ones(2, F32), np.ones(2, F32)
    out = np.full(dims.n_params, np.nan, F32)
    loss = example_grads(Tape(dims.arena), dims, w, x, t, out)
    assert loss == F32(1)
    assert np.array_equal(out[: dims.n_w1], np.zeros(dims.n_w1, F32))
    assert np.array_equal(out[dims.n_w1 :], np.zeros(dims.n_params - dims.n_w1, F32))  # relu(h) = 0


def test_same_bits_on_another_thread_and_another_arena():
    dims = Dims(8, 16, 4)
    w, x, t = init_data(dims, 3)
    here = np.empty(dims.n_params, F32)
    example_grads(Tape(dims.arena), dims, w, x[2], t[2], here)
    there = np.empty(dims.n_params, F32)
    big = Tape(dims.arena * 3)
    big.leaf(np.ones(7, F32))  # a different offset into a different arena
    th = threading.Thread(target=example_grads, args=(Tape(dims.arena), dims, w, x[2], t[2], there))
    th.start()
    th.join()
    assert np.array_equal(here.view(np.uint32), there.view(np.uint32))


class OrderRecording(ExampleHooks):
    """Records the order of the hook calls; moves the hidden layer when asked to."""

    def __init__(self, shift: float = 0.0):
        self.calls: list[str] = []
        self.shift = F32(shift)

    def after_hidden(self, tape, hidden):
        assert hidden.shape == (16,) and not self.calls
        self.calls.append("after_hidden")
        tape.val(hidden)[...] += self.shift

    def before_backward(self):
        self.calls.append("before_backward")


def test_example_hooks_are_called_in_order_and_no_op_hooks_change_no_bit():
    dims = Dims(8, 16, 4)
    w, x, t = init_data(dims, 2)
    plain, hooked = np.empty(dims.n_params, F32), np.empty(dims.n_params, F32)
    loss = example_grads(Tape(dims.arena), dims, w, x[1], t[1], plain)
    hooks = OrderRecording()
    assert example_grads(Tape(dims.arena), dims, w, x[1], t[1], hooked, hooks=hooks) == loss
    assert hooks.calls == ["after_hidden", "before_backward"]
    assert plain.tobytes() == hooked.tobytes()
    base = ExampleHooks()  # the defaults do nothing
    assert example_grads(Tape(dims.arena), dims, w, x[1], t[1], hooked, hooks=base) == loss
    assert plain.tobytes() == hooked.tobytes()


def test_a_hook_that_moves_the_hidden_layer_moves_what_relu_sees():
    dims = Dims(8, 16, 4)
    w, x, t = init_data(dims, 2)
    plain, moved = np.empty(dims.n_params, F32), np.empty(dims.n_params, F32)
    example_grads(Tape(dims.arena), dims, w, x[1], t[1], plain)
    example_grads(Tape(dims.arena), dims, w, x[1], t[1], moved, hooks=OrderRecording(shift=0.25))
    assert plain.tobytes() != moved.tobytes()
