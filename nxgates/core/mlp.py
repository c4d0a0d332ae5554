"""The MLP both tape gates differentiate: x -> W1 (H x D) -> relu -> W2 (O x H) -> mse(target).

Weights, inputs and targets are the seed's ``ta_constf`` formulas; the per-example gradient row is
``[dW1 row-major, dW2 row-major]`` (NP = H*D + O*H floats).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from nxgates.core.reductions import F32, sequential_sum, tree_sum
from nxgates.core.tape import Node, Tape, constf_array

#: every sum of the tape, by the ``reduction`` parameter's value (docs/reduction-order.md gives both orders)
REDUCTIONS = {"tree": tree_sum, "sequential": sequential_sum}

def reduction_of(params: Mapping[str, Any]) -> Callable[[np.ndarray, int], np.ndarray]:
    """The tape's reduction a gate's parameters choose (tree where the gate has no ``reduction``)."""
    return REDUCTIONS[params.get("reduction", "tree")]


@dataclass(frozen=True)
class Dims:
    D: int
    H: int
    O: int

    @classmethod
    def of(cls, params: Mapping[str, Any]) -> Dims:
        """The widths a gate's parameters (from :func:`mlp_params`) declare."""
        return cls(params["D"], params["H"], params["O"])

    @property
    def n_w1(self) -> int:
        return self.H * self.D

    @property
    def n_params(self) -> int:
        return self.H * self.D + self.O * self.H

    @property
    def arena(self) -> int:
        """Floats one example records in the arena: x, h, relu(h), y, target, loss (weights are referenced)."""
        return self.D + 2 * self.H + 2 * self.O + 1


class MlpInputs(NamedTuple):
    """A batch given as arrays (``nxgates run GATE --inputs``) instead of the seed's formulas."""

    W1: np.ndarray  #: (H, D) float32
    W2: np.ndarray  #: (O, H)
    X: np.ndarray  #: (B, D)
    T: np.ndarray  #: (B, O)

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> MlpInputs | None:
        """The arrays of a run's ``inputs`` option (validated when they were read), or None."""
        arrays = options.get("inputs")
        return None if arrays is None else cls(arrays["W1"], arrays["W2"], arrays["X"], arrays["T"])


def init_data(dims: Dims, B: int, given: MlpInputs | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The weights, inputs and targets of the first ``B`` examples: ``given``'s, else the seed's formulas."""
    return (init_weights(dims, given), *init_examples(dims, 0, B, given))


def init_weights(dims: Dims, given: MlpInputs | None = None) -> np.ndarray:
    """The weights ``[W1 row-major, W2 row-major]``: ``given``'s, else the seed's (``ta_constf`` formulas)."""
    if given is not None:
        return np.concatenate([given.W1.reshape(-1), given.W2.reshape(-1)])
    i = np.arange(dims.n_params, dtype=np.int64)
    return constf_array(((i * 7 + 1) % 13) - 6, 8)


def init_examples(dims: Dims, first: int, stop: int, given: MlpInputs | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Inputs and targets of examples ``first .. stop-1`` only, so a batch can be streamed in chunks:
    ``given``'s rows, else the seed's formulas."""
    if given is not None:
        return given.X[first:stop], given.T[first:stop]
    i = np.arange(first * dims.D, stop * dims.D, dtype=np.int64)
    x = constf_array(((i * 5 + 2) % 11) - 5, 7).reshape(stop - first, dims.D)
    i = np.arange(first * dims.O, stop * dims.O, dtype=np.int64)
    t = constf_array(((i * 3 + 1) % 9) - 4, 6).reshape(stop - first, dims.O)
    return x, t


class ExampleHooks:
    """Where a caller may act inside one example's pass; the default does nothing.

    :func:`example_grads` calls :meth:`after_hidden` once the hidden layer's pre-activation is on the tape
    (before relu reads it) and :meth:`before_backward` between the forward and the backward sweep.
    """

    def after_hidden(self, tape: Tape, hidden: Node) -> None:
        """The hidden pre-activation ``hidden`` is recorded; its value may still be changed here."""

    def before_backward(self) -> None:
        """The forward pass is recorded and the backward sweep comes next."""


def example_grads(tape: Tape, dims: Dims, w: np.ndarray, x: np.ndarray, t: np.ndarray, out: np.ndarray,
                  hooks: ExampleHooks | None = None, w1_t: np.ndarray | None = None) -> np.float32:
    """One example's forward and backward on ``tape``; writes [dW1 row-major, dW2 row-major] into ``out``
    and returns the example's loss (a trainer reports it; the gradient gates ignore it).

    The tape records the pass once per shape and replays it for every further example (the same
    operations, so the same bits). ``hooks`` (see :class:`ExampleHooks`) act inside one example's pass, at
    points a replay does not stop at: a hooked example runs through the ops unrecorded. ``w1_t`` is W1
    transposed, made once per batch (it changes speed, never bits).
    """
    D, H, O = dims.D, dims.H, dims.O
    W1, W2 = w[: dims.n_w1].reshape(H, D), w[dims.n_w1 :].reshape(O, H)
    dW1, dW2 = out[: dims.n_w1].reshape(H, D), out[dims.n_w1 :].reshape(O, H)
    if hooks is None:
        # the pass's bound arrays: what changes from one example (or step, or worker) to the next. With W1
        # transposed given, the pass reads only that (W1 itself is looked at once, when it is recorded)
        if w1_t is None:
            return F32(tape.replay(("mlp", dims, False), _mlp_pass, x, t, W1, W2, dW1, dW2))
        return F32(tape.replay(("mlp", dims, True), partial(_mlp_pass_transposed, W1), x, t, w1_t, W2, dW1, dW2))
    tape.reset()
    loss = _mlp_pass(tape, x, t, W1, W2, dW1, dW2, w1_t, hooks=hooks)
    value = F32(loss)
    tape.reset()  # drop the records (their closures hold views of ``out``) so the arrays can be freed
    return value


def _mlp_pass_transposed(W1: np.ndarray, tape: Tape, x: np.ndarray, t: np.ndarray, W1_t: np.ndarray,
                         W2: np.ndarray, dW1: np.ndarray, dW2: np.ndarray) -> np.ndarray:
    return _mlp_pass(tape, x, t, W1, W2, dW1, dW2, W1_t)


def _mlp_pass(tape: Tape, x: np.ndarray, t: np.ndarray, W1: np.ndarray, W2: np.ndarray, dW1: np.ndarray,
              dW2: np.ndarray, W1_t: np.ndarray | None = None, hooks: ExampleHooks | None = None) -> np.ndarray:
    """The MLP's forward and backward built from tape ops; returns the loss's value in the arena."""
    nx = tape.leaf(x, requires_grad=False)
    # weights are read-only during the pass: referenced, not copied; their gradients land in ``out``
    nW1 = tape.leaf(W1, copy=False, grad_out=dW1, transposed=W1_t)
    nh = tape.matvec(nW1, nx)
    if hooks is not None:
        hooks.after_hidden(tape, nh)
    na = tape.relu(nh)
    nW2 = tape.leaf(W2, copy=False, grad_out=dW2)
    ny = tape.matvec(nW2, na)
    nt = tape.leaf(t, requires_grad=False)
    loss = tape.mse(ny, nt)
    if hooks is not None:
        hooks.before_backward()
    tape.backward(loss)
    tape.grad(nW1), tape.grad(nW2)  # zero-fills a gradient nothing reached
    return tape.val(loss)
