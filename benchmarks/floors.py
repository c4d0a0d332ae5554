"""The floor a per-example gradient pass is measured against: writing its rows at all.

Whatever computes them, parallel-grad's serial pass must write B rows of NP float32 gradients; the least
numpy can do for that is one outer product per weight matrix and example (dW1 = g1 x^T, dW2 = g2 a^T), into
the same (chunk, NP) rows the gate streams. bench.py times this in the same run as the gate, so the ratio
serial pass / floor is read on the same machine at the same moment.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

F32 = np.float32


def row_writing_seconds(D: int, H: int, O: int, B: int, chunk: int = 40, repeats: int = 5) -> float:
    """Median seconds to write B per-example gradient rows by outer products, ``chunk`` rows at a time."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((B, D)).astype(F32)
    g1 = rng.standard_normal((B, H)).astype(F32)
    a = rng.standard_normal((B, H)).astype(F32)
    g2 = rng.standard_normal((B, O)).astype(F32)
    rows = np.empty((chunk, H * D + O * H), F32)
    dW1 = rows[:, : H * D].reshape(chunk, H, D)
    dW2 = rows[:, H * D :].reshape(chunk, O, H)

    def once() -> float:
        t0 = time.perf_counter()
        for b in range(B):
            slot = b % chunk
            np.multiply(g1[b, :, None], x[b, None, :], out=dW1[slot])
            np.multiply(g2[b, :, None], a[b, None, :], out=dW2[slot])
        return time.perf_counter() - t0

    once()  # the rows' pages, touched before the clock (the gate's are allocated once, too)
    return statistics.median(once() for _ in range(repeats))
