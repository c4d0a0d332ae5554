"""The relu-grad fault, shared by the gates that plant it: a tape whose relu passes the gradient through
every input, negative ones too (derivative 1 everywhere)."""

from __future__ import annotations

import numpy as np

from nxgates.core.kernels import store_or_add
from nxgates.core.reductions import Call
from nxgates.core.tape import Tape


class ReluGradEverywhereTape(Tape):
    """relu's derivative is 1 everywhere: a wrong gradient that is the same in every run."""

    def relu_grad(self, a: np.ndarray, positive: np.ndarray, g: np.ndarray, dst: np.ndarray, first: bool
                  ) -> list[Call]:
        return store_or_add(g, dst, first)
