"""A JAX function behind the invariance gate's contract: numpy arrays in, jax arrays inside, numpy out.

``nxgates run invariance --target examples/invariance/jax_adapter.py:forward --inputs mlp.npz
--set static=W1,b1,W2,b2`` checks the jitted function's rows as the gate checks any callable's. Each batch
size is its own compiled program, so I1 and I2 compare programs XLA compiled for different shapes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def model(x: jax.Array, W1: jax.Array, b1: jax.Array, W2: jax.Array, b2: jax.Array) -> jax.Array:
    """The MLP of mlp_rowloop.py, batched: logits = W2 relu(W1 x + b1) + b2."""
    hidden = jnp.maximum(x @ W1.T + b1, 0)
    return hidden @ W2.T + b2


def forward(X: np.ndarray, W1: np.ndarray, b1: np.ndarray, W2: np.ndarray, b2: np.ndarray) -> dict[str, np.ndarray]:
    """numpy -> jax -> numpy: the logits of every row of X."""
    logits = model(*(jnp.asarray(a) for a in (X, W1, b1, W2, b2)))
    return {"logits": np.asarray(logits)}
