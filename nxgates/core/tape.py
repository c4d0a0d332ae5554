"""A float32 tape autograd on a private arena: the seed's ``ta_*`` with a fixed reduction order.

Every value and every gradient lives in two preallocated float32 buffers owned by one :class:`Tape`
(the seed's private ``(tape, vals, grads, st)``); :meth:`Tape.reset` starts the next example on the same
buffers. Each op's forward sits next to its backward.

Reduction order. All arithmetic is element-wise float32 numpy (each operation correctly rounded, no
fused multiply-add, no BLAS), and every sum is :func:`tree_sum`: pairwise halving, where at each step
element ``k`` absorbs element ``k + n - n//2``. The order depends only on the length, so the same inputs
give the same bits whatever the thread, process, memory address, worker count or machine.

Gradients: the first contribution to a node's gradient is stored, later ones are added (so no pass
zeroes the arena). Data leaves (``requires_grad=False``) get no gradient.

Record and replay. Every numpy effect of an op goes through :meth:`Tape._do` as the numpy calls its
kernel makes (:mod:`nxgates.core.kernels`). :meth:`Tape.record` keeps those calls as a
:class:`~nxgates.core.program.Program`, which replays them for the next example of the same shapes with
only the bound arrays exchanged: the same operations in the same order, without building the graph, its
views or its buffers again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nxgates.core.kernels import (
    broadcast_grad,
    copy_into,
    fill_one,
    fill_zero,
    matmul_forward,
    matmul_left_grad,
    matmul_right_grad,
    matvec_forward,
    matvec_input_grad,
    mse_forward,
    mse_grad,
    negated_grad,
    outer_add,
    outer_into,
    product_grad,
    relu_forward,
    relu_input_grad,
    run,
    store_or_add,
    sum_forward,
)
from nxgates.core.program import Program
from nxgates.core.reductions import F32, Call, Reduce, sequential_sum, tree_sum

__all__ = ["F32", "ArenaFull", "Node", "Tape", "constf", "constf_array", "sequential_sum", "tree_sum"]


def constf(n: int, d: int) -> np.float32:
    """The seed's ``ta_constf``: float32(n) / float32(d), correctly rounded."""
    return F32(n) / F32(d)


def constf_array(n: np.ndarray, d: int) -> np.ndarray:
    """:func:`constf` element-wise (numpy's float32 division is the same correctly rounded operation)."""
    return n.astype(F32) / F32(d)


class ArenaFull(RuntimeError):
    """The tape ran out of its preallocated arena (its capacity was planned too small)."""


@dataclass(eq=False)
class Node:
    """A tensor on the tape: ``size`` floats at ``offset`` in the value and gradient arenas."""

    offset: int
    shape: tuple[int, ...]
    requires_grad: bool
    parents: tuple[Node, ...] = ()
    backward: Callable[[], None] | None = field(default=None, repr=False)
    has_grad: bool = False
    value_ref: np.ndarray | None = field(default=None, repr=False)  #: a leaf's value kept outside the arena
    grad_ref: np.ndarray | None = field(default=None, repr=False)  #: where a leaf's gradient is written
    transposed_ref: np.ndarray | None = field(default=None, repr=False)  #: a contiguous copy of value.T
    size: int = field(init=False)

    def __post_init__(self) -> None:
        self.size = math.prod(self.shape)


class Tape:
    """A private arena plus the op records of one forward pass, and the programs recorded on the arena."""

    def __init__(self, capacity: int, vals: np.ndarray | None = None, grads: np.ndarray | None = None,
                 reduce: Reduce = tree_sum):
        self.reduce = reduce  #: every sum of every op: (buffer, axis) -> the sums, destroying the buffer
        self.vals = np.zeros(capacity, F32) if vals is None else vals
        self.grads = np.zeros(capacity, F32) if grads is None else grads
        if self.vals.dtype != F32 or self.grads.dtype != F32 or min(self.vals.size, self.grads.size) < capacity:
            raise ValueError("a tape's arenas are float32 buffers of at least its capacity")
        self.capacity = capacity
        self.nodes: list[Node] = []
        self.top = 0
        self._scratch = np.empty(0, F32)
        self._steps: list[Call] | None = None  #: the calls being recorded, on a recording copy only
        self.programs: dict[Hashable, Program] = {}

    def __getstate__(self) -> dict:
        """A copy elsewhere (another process) records its own programs: theirs hold this process's views."""
        return dict(self.__dict__, programs={})

    # ---- record and replay ------------------------------------------------------------------------------

    def _do(self, calls: list[Call]) -> None:
        """Make the numpy calls of an op (and keep them, while recording)."""
        run(calls)
        if self._steps is not None:
            self._steps += calls

    def record(self, build: Callable[..., Any], *bound: np.ndarray) -> Program:
        """Run ``build(tape, *bound)`` (a pass made of this tape's ops) once and keep it as a program.

        The pass runs on a recording copy of the tape that shares this tape's arenas and reduction, so the
        program writes where this tape writes; this tape's own records are left as they are.
        """
        recorder = object.__new__(type(self))
        recorder.__dict__.update(self.__dict__, nodes=[], top=0, _steps=[], programs={})
        result = build(recorder, *bound)
        steps = recorder._steps
        recorder.reset()
        return Program(steps, bound, result)

    def replay(self, key: Hashable, build: Callable[..., Any], *bound: np.ndarray) -> Any:
        """``build``'s pass on ``bound``: recorded under ``key`` the first time, replayed after; returns
        what the pass returned (a view into the arena, current after each run)."""
        program = self.programs.get(key)
        if program is None:
            program = self.programs[key] = self.record(build, *bound)
            return program.result
        return program.run(*bound)

    # ---- arena ------------------------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget the previous example; its floats are overwritten as the next one is recorded."""
        for n in self.nodes:
            n.backward = None  # each op's closure refers to its own node: break the cycle, free at once
        self.nodes.clear()
        self.top = 0

    def _new(self, shape: tuple[int, ...], parents: tuple[Node, ...] = ()) -> Node:
        node = Node(self.top, shape, any(p.requires_grad for p in parents), parents)
        if self.top + node.size > self.capacity:
            raise ArenaFull(f"tape arena full: {self.top + node.size} floats needed, capacity {self.capacity}")
        self.top += node.size
        self.nodes.append(node)
        return node

    def val(self, n: Node) -> np.ndarray:
        if n.value_ref is not None:
            return n.value_ref
        return self.vals[n.offset : n.offset + n.size].reshape(n.shape)

    def val_grad(self, n: Node) -> np.ndarray:
        """Where ``n``'s gradient lives (meaningful once ``n.has_grad``)."""
        if n.grad_ref is not None:
            return n.grad_ref
        return self.grads[n.offset : n.offset + n.size].reshape(n.shape)

    def grad(self, n: Node) -> np.ndarray:
        """The gradient of ``n`` after :meth:`backward` (zeros if nothing reached it)."""
        g = self.val_grad(n)
        if not n.has_grad:
            self._do(fill_zero(g))
            n.has_grad = True
        return g

    def scratch(self, shape: tuple[int, ...]) -> np.ndarray:
        """Temporary float32 space for products; reused across ops, so no per-op allocation."""
        size = math.prod(shape)
        if self._scratch.size < size:
            self._scratch = np.empty(size, F32)
        return self._scratch[:size].reshape(shape)

    def _acc(self, n: Node, kernel: Callable[..., None], *args: Any) -> None:
        """Add what ``kernel(*args, dst, first)`` contributes to ``n``'s gradient (stored if the first)."""
        self._do(kernel(*args, self.val_grad(n), not n.has_grad))
        n.has_grad = True

    # ---- ops: forward, then backward -----------------------------------------------------------------

    def leaf(self, data: np.ndarray, requires_grad: bool = True, copy: bool = True,
             grad_out: np.ndarray | None = None, transposed: np.ndarray | None = None) -> Node:
        """A tensor the pass starts from: copied into the arena (the seed's ``ta_leaf``), or with
        ``copy=False`` referenced where it is, for parameters that stay read-only during the pass.
        ``grad_out`` receives the leaf's gradient directly, sparing an arena copy of it; ``transposed``
        (a contiguous ``data.T``, made once per batch) lets :meth:`matvec` read the matrix column-wise fast.
        """
        data = np.asarray(data)
        if data.dtype != F32:
            raise TypeError(f"tape values are float32, got {data.dtype}")
        if grad_out is not None and (grad_out.shape != data.shape or grad_out.dtype != F32):
            raise ValueError(f"grad_out must be float32 of shape {data.shape}")
        if copy:
            n = self._new(tuple(data.shape))
            self._do(copy_into(self.val(n), data))
        elif grad_out is None:  # a referenced leaf's gradient (zeros for data) needs arena room of its own
            n = self._new(tuple(data.shape))
            n.value_ref = data
        else:
            n = Node(self.top, tuple(data.shape), False, value_ref=data)
            self.nodes.append(n)
        if transposed is not None and (transposed.shape != data.shape[::-1] or not np.array_equal(transposed[:1].T,
                                                                                                  data[:, :1])):
            raise ValueError("transposed must be data.T")
        n.requires_grad = requires_grad
        n.grad_ref = grad_out
        n.transposed_ref = transposed
        return n

    def matvec(self, W: Node, x: Node) -> Node:
        """``y[i] = sum_j W[i,j] * x[j]``.

        The products are laid out j-major, so each halving step of the tree over j adds two contiguous
        blocks (the bits are those of any layout: the tree is defined on j alone).
        """
        out = self._new((W.shape[0],), (W, x))
        Wv, xv = self.val(W), self.val(x)
        prod_t = self.scratch(W.shape[::-1])
        self._do(matvec_forward(self.reduce, Wv, W.transposed_ref, xv, prod_t, self.val(out)))
        prod = prod_t.reshape(W.shape)  # the same scratch, reused as backward's (m, n) buffer

        def backward() -> None:
            g = self.val_grad(out)
            if W.requires_grad:  # dW[i,j] = g[i] * x[j]: one product per cell, nothing to reduce
                if W.has_grad:
                    self._do(outer_add(g, xv, prod, self.val_grad(W)))
                else:  # first contribution: straight into W's gradient
                    self._do(outer_into(g, xv, self.val_grad(W)))
                    W.has_grad = True
            if x.requires_grad:  # dx[j] = sum_i W[i,j] * g[i]
                self._acc(x, matvec_input_grad, self.reduce, Wv, g, prod)

        out.backward = backward
        return out

    def matmul(self, A: Node, B: Node) -> Node:
        """``C[i,j] = sum_k A[i,k] * B[k,j]``."""
        (m, k), (_, n) = A.shape, B.shape
        out = self._new((m, n), (A, B))
        Av, Bv = self.val(A), self.val(B)
        prod = self.scratch((m, k, n))
        self._do(matmul_forward(self.reduce, Av, Bv, prod, self.val(out)))

        def backward() -> None:
            g = self.val_grad(out)
            if A.requires_grad:  # dA[i,k] = sum_j g[i,j] * B[k,j]
                self._acc(A, matmul_left_grad, self.reduce, g, Bv, prod)
            if B.requires_grad:  # dB[k,j] = sum_i A[i,k] * g[i,j]
                self._acc(B, matmul_right_grad, self.reduce, Av, g, prod)

        out.backward = backward
        return out

    def add(self, a: Node, b: Node) -> Node:
        """``a + b`` (same shapes)."""
        out = self._new(a.shape, (a, b))
        self._do([(np.add, (self.val(a), self.val(b), self.val(out)))])

        def backward() -> None:
            g = self.val_grad(out)
            for p in (a, b):
                if p.requires_grad:
                    self._acc(p, store_or_add, g)

        out.backward = backward
        return out

    def mul(self, a: Node, b: Node) -> Node:
        """``a * b`` element-wise (same shapes)."""
        out = self._new(a.shape, (a, b))
        av, bv = self.val(a), self.val(b)
        self._do([(np.multiply, (av, bv, self.val(out)))])

        def backward() -> None:
            g = self.val_grad(out)
            if a.requires_grad:
                self._acc(a, product_grad, g, bv)
            if b.requires_grad:
                self._acc(b, product_grad, g, av)

        out.backward = backward
        return out

    def relu(self, a: Node) -> Node:
        """``max(a, 0)``; its derivative at 0 is 0."""
        out = self._new(a.shape, (a,))
        av = self.val(a)
        positive = np.empty(a.shape, bool)  # where a > 0, for the backward
        self._do(relu_forward(av, positive, self.val(out)))

        def backward() -> None:
            if a.requires_grad:
                self._acc(a, self.relu_grad, av, positive, self.val_grad(out))

        out.backward = backward
        return out

    def relu_grad(self, a: np.ndarray, positive: np.ndarray, g: np.ndarray, dst: np.ndarray, first: bool
                  ) -> list[Call]:
        """The calls that hand relu's input ``a`` its gradient from ``g``: ``g`` where ``a > 0`` (``positive``,
        from the forward), else +0.0; stored in ``dst``, or added if not the first contribution. The one place
        relu's derivative is defined, so a subclass can give the tape another one."""
        return relu_input_grad(positive, g, dst, first)

    def sum(self, a: Node) -> Node:
        """The sum of all elements, as a scalar node."""
        out = self._new((), (a,))
        self._do(sum_forward(self.reduce, self.val(a), self.scratch((a.size,)), self.val(out)))

        def backward() -> None:
            if a.requires_grad:
                self._acc(a, broadcast_grad, self.val_grad(out))

        out.backward = backward
        return out

    def mse(self, y: Node, t: Node) -> Node:
        """``mean((y - t)^2)``: the tree sum of squared differences divided by float32(n)."""
        out = self._new((), (y, t))
        diff, sq = np.empty(y.shape, F32), np.empty(y.shape, F32)  # diff is kept for the backward
        self._do(mse_forward(self.reduce, self.val(y), self.val(t), diff, sq, self.val(out)))

        def backward() -> None:
            direct = y.requires_grad and not y.has_grad  # y's first gradient: written where it goes
            dy = self.val_grad(y) if direct else sq  # else into the spent squares' buffer
            self._do(mse_grad(diff, self.val_grad(out), dy))
            if direct:
                y.has_grad = True
            elif y.requires_grad:
                self._acc(y, store_or_add, dy)
            if t.requires_grad:
                self._acc(t, negated_grad, dy)

        out.backward = backward
        return out

    # ---- backward -----------------------------------------------------------------------------------

    def backward(self, loss: Node) -> None:
        """Reverse-mode sweep from a scalar: d loss / d loss = 1, then the ops in reverse record order."""
        if loss.shape != ():
            raise ValueError("backward starts from a scalar node")
        for n in self.nodes:
            n.has_grad = False
        self._do(fill_one(self.val_grad(loss)))
        loss.has_grad = True
        for n in reversed(self.nodes):
            if n.backward is not None and n.has_grad and n.requires_grad:
                n.backward()
