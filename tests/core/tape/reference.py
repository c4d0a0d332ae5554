"""The float32 sums the tape's are held to, written out as plain loops: left to right, and the pairwise tree
(docs/reduction-order.md); and values spread over many magnitudes, where the order of a sum shows."""

import numpy as np

from nxgates.core.tape import F32


def loop_sum(values) -> np.float32:
    acc = F32(0)
    for v in values:
        acc = F32(acc + F32(v))
    return acc


def tree_of(values) -> np.float32:
    level = [F32(v) for v in values]
    while len(level) > 1:
        m, h = len(level), len(level) // 2
        level = [F32(level[k] + level[k + m - h]) for k in range(h)] + ([level[h]] if m - h > h else [])
    return level[0]


def spread(shape, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 10.0 ** rng.integers(-5, 6, shape)).astype(F32)
