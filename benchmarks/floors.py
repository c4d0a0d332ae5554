"""What a per-example gradient pass is measured against: writing its rows at all, and its own arithmetic
written as a plain loop.

* The row-writing floor. Whatever computes them, parallel-grad's serial pass must write B rows of NP float32
  gradients; the least numpy can do for that is one outer product per weight matrix and example (dW1 = g1
  x^T, dW2 = g2 a^T), into the same (chunk, NP) rows the gate streams. numpy walks such a broadcast product
  through its ufunc buffer unless the buffer is no longer than a row: the floor is timed with the buffer the
  tape's replay uses (the least numpy can do) and, for comparison, with numpy's default.
* The plain loop. The serial pass's arithmetic (docs/reduction-order.md) written out by hand as numpy calls
  on preallocated buffers, backward derived by hand, no tape, with the same ufunc buffer: what the tape's
  pass would cost if recording and replaying cost nothing. Its rows are checked against the tape's, bit for
  bit, before it is timed.

bench_tape.py times these in the same run as the gate, so each ratio is read on the same machine at the same
moment.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np

from nxgates.core.mlp import Dims, example_grads, init_data
from nxgates.core.reductions import tree_sum
from nxgates.core.tape import Tape

F32 = np.float32


def replay_buffer(D: int, H: int, O: int) -> int:
    """numpy's ufunc buffer (elements) the tape's recorded pass runs with at these sizes."""
    dims = Dims(D, H, O)
    w, x, t = init_data(dims, 1)
    tape = Tape(dims.arena)
    example_grads(tape, dims, w, x[0], t[0], np.empty(dims.n_params, F32),
                  w1_t=np.ascontiguousarray(w[: dims.n_w1].reshape(H, D).T))
    return next(iter(tape.programs.values())).buffer


def _timed(once: Callable[[], float], repeats: int, buffer: int | None) -> float:
    saved = np.setbufsize(buffer) if buffer is not None else None
    try:
        once()  # the rows' pages, touched before the clock (the gate's are mapped before its timed passes)
        return statistics.median(once() for _ in range(repeats))
    finally:
        if saved is not None:
            np.setbufsize(saved)


def row_writing_seconds(D: int, H: int, O: int, B: int, chunk: int = 40, repeats: int = 5,
                        buffer: int | None = None) -> float:
    """Median seconds to write B per-example gradient rows by outer products, ``chunk`` rows at a time, with
    numpy's ufunc buffer ``buffer`` (elements; None: numpy's default)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((B, D)).astype(F32)
    g1 = rng.standard_normal((B, H)).astype(F32)
    a = rng.standard_normal((B, H)).astype(F32)
    g2 = rng.standard_normal((B, O)).astype(F32)
    rows = np.empty((chunk, H * D + O * H), F32)
    dW1 = rows[:, : H * D].reshape(chunk, H, D)
    dW2 = rows[:, H * D :].reshape(chunk, O, H)

    def once() -> float:
        t0 = time.perf_counter()
        for b in range(B):
            slot = b % chunk
            np.multiply(g1[b, :, None], x[b, None, :], out=dW1[slot])
            np.multiply(g2[b, :, None], a[b, None, :], out=dW2[slot])
        return time.perf_counter() - t0

    return _timed(once, repeats, buffer)


class PlainLoop:
    """One example's forward and backward of the gates' MLP as plain numpy calls on buffers made once: the
    order of docs/reduction-order.md with the tree, W1 read through its transposed copy as the gate does."""

    def __init__(self, W1: np.ndarray, W2: np.ndarray):
        (H, D), (O, _) = W1.shape, W2.shape
        self.W1T, self.W2 = np.ascontiguousarray(W1.T), W2
        self.products = np.empty((D, H), F32)  # W1's, j-major; then W2's (H, O) and its backward's (O, H)
        self.h, self.a, self.y = np.empty(H, F32), np.empty(H, F32), np.empty(O, F32)
        self.positive = np.empty(H, bool)
        self.d, self.s, self.dy = np.empty(O, F32), np.empty(O, F32), np.empty(O, F32)
        self.da, self.dh = np.empty(H, F32), np.empty(H, F32)
        self.two_over_n = F32(2) / F32(O)

    def __call__(self, x: np.ndarray, t: np.ndarray, dW1: np.ndarray, dW2: np.ndarray) -> None:
        H, O = self.h.size, self.y.size
        p = self.products
        np.multiply(self.W1T, x[:, None], out=p)  # 1. h = W1 x
        self.h[...] = tree_sum(p, 0)
        np.greater(self.h, F32(0), out=self.positive)  # 2. a = relu(h)
        self.a[...] = 0
        np.putmask(self.a, self.positive, self.h)
        p2 = p.reshape(-1)[: H * O].reshape(H, O)  # 3. y = W2 a
        np.multiply(self.W2.T, self.a[:, None], out=p2)
        self.y[...] = tree_sum(p2, 0)
        np.subtract(self.y, t, out=self.d)  # 4.-5. the loss (not needed for the rows, made as the gate makes it)
        np.multiply(self.d, self.d, out=self.s)
        tree_sum(self.s, 0)
        np.multiply(self.d, self.two_over_n, out=self.dy)  # 6. dy = d * (2 / O) * 1.0
        np.multiply(self.dy, F32(1), out=self.dy)
        np.multiply(self.dy[:, None], self.a[None, :], out=dW2)  # 7. dW2 = dy a^T
        p3 = p.reshape(-1)[: O * H].reshape(O, H)  # 8. da = W2^T dy
        np.multiply(self.W2, self.dy[:, None], out=p3)
        self.da[...] = tree_sum(p3, 0)
        self.dh[...] = 0  # 9. dh = da where h > 0
        np.putmask(self.dh, self.positive, self.da)
        np.multiply(self.dh[:, None], x[None, :], out=dW1)  # 10. dW1 = dh x^T


def plain_loop_seconds(D: int, H: int, O: int, B: int, chunk: int = 40, repeats: int = 3,
                       buffer: int | None = None) -> float:
    """Median seconds of the plain loop over the seed's B examples into ``chunk`` rows, with numpy's ufunc
    buffer ``buffer``; raises if its rows are not the tape's bits."""
    dims = Dims(D, H, O)
    w, X, T = init_data(dims, B)
    W1, W2 = w[: dims.n_w1].reshape(H, D), w[dims.n_w1 :].reshape(O, H)
    loop = PlainLoop(W1, W2)
    rows = np.empty((chunk, dims.n_params), F32)
    dW1, dW2 = rows[:, : dims.n_w1].reshape(chunk, H, D), rows[:, dims.n_w1 :].reshape(chunk, O, H)
    tape, taped = Tape(dims.arena), np.empty(dims.n_params, F32)
    for b in range(min(B, 3)):
        loop(X[b], T[b], dW1[0], dW2[0])
        example_grads(tape, dims, w, X[b], T[b], taped)
        if rows[0].tobytes() != taped.tobytes():
            raise AssertionError(f"the plain loop's row of example {b} is not the tape's")

    def once() -> float:
        t0 = time.perf_counter()
        for b in range(B):
            slot = b % chunk
            loop(X[b], T[b], dW1[slot], dW2[slot])
        return time.perf_counter() - t0

    return _timed(once, repeats, buffer)
