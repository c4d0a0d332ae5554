"""The tape's arenas and each op's forward values and gradients, exactly: the float32 bits of the
documented order, every gradient accumulated where a node is used twice, and the refusals."""

import numpy as np
import pytest

from nxgates.core.tape import F32, ArenaFull, Tape
from tests.core.test_tape import reference_tree_sum

rng = np.random.default_rng(13)


def test_a_referenced_leaf_keeps_its_own_gradient():
    """Regression: a ``copy=False`` leaf without ``grad_out`` once shared its gradient with the next node."""
    tape = Tape(16)
    w = tape.leaf(np.array([1.0, 2.0], F32), copy=False)
    x = tape.leaf(np.array([3.0, 4.0], F32))
    tape.backward(tape.sum(tape.mul(w, x)))
    assert tape.grad(w).tolist() == [3.0, 4.0]
    assert tape.grad(x).tolist() == [1.0, 2.0]
