"""``X @ W`` as one matrix product: BLAS picks its kernel and blocking by the batch's size, so a row's bits
may depend on how many rows came with it. The invariance gate shows where
(``nxgates run invariance --target examples/invariance/matmul.py:forward --inputs matmul.npz --set static=W``).
"""

from __future__ import annotations

import numpy as np


def forward(X: np.ndarray, W: np.ndarray) -> np.ndarray:
    """The batch's rows times W: (N, D) @ (D, H)."""
    return X @ W
