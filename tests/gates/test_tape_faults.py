"""The relu-grad fault the gates plant (nxgates/gates/_tape_faults.py): a tape whose relu passes the gradient
through every input, negative ones and zero too."""

import numpy as np

from nxgates.core.tape import F32
from nxgates.gates._tape_faults import ReluGradEverywhereTape


def test_the_planted_relu_fault_passes_the_gradient_through_everywhere():
    tape = ReluGradEverywhereTape(16)
    x = tape.leaf(np.array([-1.0, 0.0, 2.0], F32))
    tape.backward(tape.sum(tape.relu(x)))
    assert tape.grad(x).tolist() == [1.0, 1.0, 1.0]
