"""A recorded pass of the tape: the numpy calls of one example, replayed for the next examples.

Recording (:meth:`nxgates.core.tape.Tape.record`) runs a pass once through the tape's ops and keeps every
numpy call it made, with the arena views, scratch buffers and flags it made them with. Replaying makes the
same calls in the same order, so the same bits, with only the *bound* arrays (the pass's inputs and the
arrays its gradients are written into) replaced by the next example's. The node graph, its closures, the
arena offsets, every view and the has-gradient decisions are the recorded example's: they depend on the
shapes only.

A replay runs with numpy's ufunc buffer no longer than the shortest long row the pass writes
(:func:`ufunc_buffer`): numpy otherwise copies the broadcast operand of an outer product or of a row-scaled
matrix through that buffer, row group by row group, which costs about twice the products themselves. The
buffer changes how numpy walks the arrays, never an operation, so never a bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from nxgates.core.reductions import Call

#: numpy's default ufunc buffer (elements), kept where no row of the pass is long
DEFAULT_BUFFER = 8192
#: a call whose largest array has at least this many elements is a long operation
LONG_OPERATION = 8192
#: rows at least this long are walked unbuffered; shorter rows gain from numpy gathering them into a buffer
LONG_ROW = 128


def ufunc_buffer(calls: Sequence[Call]) -> int:
    """numpy's ufunc buffer size for a replay of ``calls``: the shortest row (last axis) among the long
    operations' largest arrays whose rows are long, rounded down to the multiple of 16 numpy asks for; else
    numpy's default."""
    rows = [DEFAULT_BUFFER]
    for _, args in calls:
        arrays = [a for a in args if isinstance(a, np.ndarray)]
        if arrays:
            largest = max(arrays, key=lambda a: a.size)
            if largest.size >= LONG_OPERATION and largest.ndim >= 2 and largest.shape[-1] >= LONG_ROW:
                rows.append(largest.shape[-1])
    return min(rows) // 16 * 16


class ReplayStep(NamedTuple):
    kernel: Any  #: the function called
    args: tuple[Any, ...]  #: the recorded arguments, None where a bound array goes
    slots: tuple[tuple[int, int], ...]  #: (argument position, index of the bound array) to put there


class Program:
    """The calls of one recorded pass and where each run's bound arrays go in them.

    A bound array must reach the calls as the very array that was bound (not a view made of it), or a
    replay would read or write the recorded example's memory: recording refuses both a bound array no call
    uses and a call argument that overlaps a bound array without being it.
    """

    def __init__(self, steps: Sequence[Call], bound: Sequence[np.ndarray], result: Any = None):
        slot_of = {id(a): i for i, a in enumerate(bound)}
        if len(slot_of) != len(bound):
            raise ValueError("a pass cannot bind the same array twice")
        self.signature = tuple((a.shape, a.dtype) for a in bound)
        self.result = result  #: what the pass returned (an arena view, current after every run)
        used: set[int] = set()
        self.steps: list[ReplayStep] = []
        for kernel, args in steps:
            slots = tuple((pos, slot_of[id(a)]) for pos, a in enumerate(args) if id(a) in slot_of)
            for pos, a in enumerate(args):
                if isinstance(a, np.ndarray) and id(a) not in slot_of and any(
                        np.may_share_memory(a, b) for b in bound):
                    raise ValueError(f"step {kernel.__name__} reads a view of a bound array (argument {pos}): "
                                     "pass the bound array itself")
            used.update(i for _, i in slots)
            self.steps.append(ReplayStep(kernel, tuple(None if id(a) in slot_of else a for a in args), slots))
        if len(used) != len(bound):
            raise ValueError(f"bound arrays {sorted(set(range(len(bound))) - used)} reach no step")
        self.buffer = ufunc_buffer(steps)  #: numpy's ufunc buffer for a replay (elements)

    def run(self, *bound: np.ndarray) -> Any:
        """Replay the pass on ``bound`` (the same shapes and dtypes as recorded); returns its result."""
        if tuple((a.shape, a.dtype) for a in bound) != self.signature:
            raise ValueError("a program replays only on arrays of the shapes and dtypes it was recorded with")
        saved = np.setbufsize(self.buffer)
        try:  # overflow gives inf and NaN silently, as the recording's kernels do (nxgates.core.kernels.run)
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                for kernel, args, slots in self.steps:
                    if slots:
                        args = list(args)  # a fresh list each run: the recording stays as it is
                        for pos, i in slots:
                            args[pos] = bound[i]
                    kernel(*args)
        finally:
            np.setbufsize(saved)
        return self.result
