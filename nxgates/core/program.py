"""A recorded pass of the tape: the numpy steps of one example, replayed for the next examples.

Recording (:meth:`nxgates.core.tape.Tape.record`) runs a pass once through the tape's ops and keeps every
numpy step it took, with the arena views, scratch buffers and flags it took them with. Replaying runs the
same steps in the same order, so the same bits, with only the *bound* arrays (the pass's inputs and the
arrays its gradients are written into) replaced by the next example's. The node graph, its closures, the
arena offsets and the has-gradient decisions are the recorded example's: they depend on the shapes only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, NamedTuple

import numpy as np

#: a step as the tape records it: a kernel and the arguments it was called with
Step = tuple[Callable[..., Any], tuple[Any, ...]]


class ReplayStep(NamedTuple):
    kernel: Callable[..., Any]
    args: tuple[Any, ...]  #: the recorded arguments, None where a bound array goes
    slots: tuple[tuple[int, int], ...]  #: (argument position, index of the bound array) to put there


class Program:
    """The steps of one recorded pass and where each run's bound arrays go in them.

    A bound array must reach the steps as the very array that was bound (not a view made of it), or a
    replay would read or write the recorded example's memory: recording refuses both a bound array no step
    uses and a step argument that overlaps a bound array without being it.
    """

    def __init__(self, steps: Sequence[Step], bound: Sequence[np.ndarray], result: Any = None):
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
            args = tuple(None if id(a) in slot_of else a for a in args)
            self.steps.append(ReplayStep(kernel, args, slots))
        if len(used) != len(bound):
            raise ValueError(f"bound arrays {sorted(set(range(len(bound))) - used)} reach no step")
        # what a run calls: a step with nothing bound as one ready call (fewer Python operations a step)
        self._calls = [step if step.slots else ReplayStep(partial(step.kernel, *step.args), (), ())
                       for step in self.steps]

    def run(self, *bound: np.ndarray) -> Any:
        """Replay the pass on ``bound`` (the same shapes and dtypes as recorded); returns its result."""
        if tuple((a.shape, a.dtype) for a in bound) != self.signature:
            raise ValueError("a program replays only on arrays of the shapes and dtypes it was recorded with")
        for kernel, args, slots in self._calls:
            if slots:
                args = list(args)
                for pos, i in slots:
                    args[pos] = bound[i]
            kernel(*args)
        return self.result
