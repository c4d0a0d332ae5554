"""The MLP both tape gates differentiate: x -> W1 (H x D) -> relu -> W2 (O x H) -> mse(target).

Weights, inputs and targets are the seed's ``ta_constf`` formulas; the per-example gradient row is
``[dW1 row-major, dW2 row-major]`` (NP = H*D + O*H floats).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nxgates.core.tape import F32, Tape, constf_array


@dataclass(frozen=True)
class Dims:
    D: int
    H: int
    O: int

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


def init_data(dims: Dims, B: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The seed's deterministic weights, inputs and targets (``ta_constf`` formulas)."""
    return (init_weights(dims), *init_examples(dims, 0, B))


def init_weights(dims: Dims) -> np.ndarray:
    """The seed's weights, ``[W1 row-major, W2 row-major]``."""
    i = np.arange(dims.n_params, dtype=np.int64)
    return constf_array(((i * 7 + 1) % 13) - 6, 8)


def init_examples(dims: Dims, first: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """Inputs and targets of examples ``first .. stop-1`` only, so a batch can be streamed in chunks."""
    i = np.arange(first * dims.D, stop * dims.D, dtype=np.int64)
    x = constf_array(((i * 5 + 2) % 11) - 5, 7).reshape(stop - first, dims.D)
    i = np.arange(first * dims.O, stop * dims.O, dtype=np.int64)
    t = constf_array(((i * 3 + 1) % 9) - 4, 6).reshape(stop - first, dims.O)
    return x, t


def example_grads(tape: Tape, dims: Dims, w: np.ndarray, x: np.ndarray, t: np.ndarray, out: np.ndarray,
                  between=None, drift: int = 0, w1_t: np.ndarray | None = None) -> np.float32:
    """One example's forward and backward on ``tape``; writes [dW1 row-major, dW2 row-major] into ``out``
    and returns the example's loss (a trainer reports it; the gradient gates ignore it).

    ``between`` runs between forward and backward (the shared-arena fault's barrier); ``drift`` is the
    nondeterministic fault's hidden state (0 when the fault is off); ``w1_t`` is W1 transposed, made once
    per batch (it changes speed, never bits).
    """
    D, H, O = dims.D, dims.H, dims.O
    tape.reset()
    nx = tape.leaf(x, requires_grad=False)
    # weights are read-only during the pass: referenced, not copied; their gradients land in ``out``
    g1, g2 = out[: dims.n_w1].reshape(H, D), out[dims.n_w1 :].reshape(O, H)
    nW1 = tape.leaf(w[: dims.n_w1].reshape(H, D), copy=False, grad_out=g1, transposed=w1_t)
    nh = tape.matvec(nW1, nx)
    if drift:
        tape.val(nh)[...] += F32(drift) * F32(0.001)
    na = tape.relu(nh)
    nW2 = tape.leaf(w[dims.n_w1 :].reshape(O, H), copy=False, grad_out=g2)
    ny = tape.matvec(nW2, na)
    nt = tape.leaf(t, requires_grad=False)
    loss = tape.mse(ny, nt)
    if between is not None:
        between()
    tape.backward(loss)
    tape.grad(nW1), tape.grad(nW2)  # zero-fills a gradient nothing reached
    value = F32(tape.val(loss))
    tape.reset()  # drop the records (their closures hold views of ``out``) so the arrays can be freed
    return value
