"""Per-example gradients of the parallel-grad MLP with JAX's jit(vmap(grad)) on the CPU: the compiled peer.

Run by benchmarks/bench.py with the interpreter of .venv-peer (made by `make peer-venv`); JAX is never a
dependency of nxgates. The program is traced and compiled once before the clock (as the tape records once):
the figure is one batch's per-example gradients in host memory, as JAX lays them out ((B, H, D) and
(B, O, H) float32: the same floats as the gate's (B, NP) rows, without charging JAX a copy into that
layout). Prints one JSON line: {"seconds": median, "jax": version, "devices": n}.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import jax
import jax.numpy as jnp
from peer_data import seed_data


def main() -> None:
    D, H, O, B, repeats = (int(a) for a in sys.argv[1:6])
    first, second, x, t = seed_data(D, H, O, B)
    W1, W2 = jnp.asarray(first), jnp.asarray(second)
    X, T = jnp.asarray(x), jnp.asarray(t)

    def loss(params, xb, tb):
        w1, w2 = params
        return jnp.mean((w2 @ jax.nn.relu(w1 @ xb) - tb) ** 2)

    per_example = jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)))

    def once() -> float:
        t0 = time.perf_counter()
        g1, g2 = jax.block_until_ready(per_example((W1, W2), X, T))
        assert g1.shape == (B, H, D) and g2.shape == (B, O, H) and g1.dtype == jnp.float32
        return time.perf_counter() - t0

    once()  # trace and compile
    seconds = statistics.median(once() for _ in range(repeats))
    print(json.dumps({"seconds": seconds, "jax": jax.__version__, "devices": jax.device_count()}))


if __name__ == "__main__":
    main()
