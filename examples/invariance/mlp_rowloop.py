"""A two-layer MLP computed one row at a time: each row's outputs come from that row alone, so the
invariance gate passes it (``nxgates run invariance --target examples/invariance/mlp_rowloop.py:forward``).

Every row is its own matrix-vector product: the same kernel, the same sizes and the same order of sums
whatever batch the row came in, on whatever thread.
"""

from __future__ import annotations

import numpy as np


def forward(X: np.ndarray, W1: np.ndarray, b1: np.ndarray, W2: np.ndarray, b2: np.ndarray
            ) -> dict[str, np.ndarray]:
    """Per row of X (N, D): the hidden layer relu(W1 x + b1), the logits W2 h + b2 and the predicted class."""
    hidden = np.empty((X.shape[0], W1.shape[0]), np.float32)
    logits = np.empty((X.shape[0], W2.shape[0]), np.float32)
    for i, x in enumerate(X):
        hidden[i] = np.maximum(W1 @ x + b1, 0)
        logits[i] = W2 @ hidden[i] + b2
    return {"hidden": hidden, "logits": logits, "label": np.argmax(logits, axis=1)}
