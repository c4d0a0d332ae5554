"""invariance's checks: their names, and I1-I3, which call the target serially and compare with its output
on the whole batch (I4 is :mod:`.parallel`; I5 is every serial call made twice, :class:`.calls.Caller`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nxgates.gates.invariance.compare import CheckTally

I1 = "I1 row alone == in batch"
I2 = "I2 any split == whole batch"
I3 = "I3 batch mates do not matter"
I4 = "I4 parallel == serial on >1 worker"
I5 = "I5 deterministic (every call repeated)"
CHECKS = (I1, I2, I3, I4, I5)

Outputs = dict[str, np.ndarray]
Call = Callable[[np.ndarray | slice], Outputs]


def sample_rows(n: int, rows: int, rng: np.random.Generator) -> np.ndarray:
    """Every row, or a seeded sample of ``rows`` of them (in order) when the batch has more."""
    if n <= rows:
        return np.arange(n)
    return np.sort(rng.choice(n, size=rows, replace=False))


def split_sizes(splits: str, n: int) -> list[int]:
    """I2's chunk sizes for a batch of ``n``: ``half`` is n // 2; sizes of 0 or of n (no split) left out."""
    sizes = [n // 2 if s == "half" else int(s) for s in splits.split(",")]
    return sorted({s for s in sizes if 0 < s < n})


def _rows(outputs: Outputs, rows: np.ndarray | slice) -> Outputs:
    return {name: a[rows] for name, a in outputs.items()}


def check_alone(call: Call, whole: Outputs, sample: np.ndarray, ulp: int) -> CheckTally:
    """I1: each sampled row called alone gives its cells of the whole batch's call."""
    tally = CheckTally(ulp)
    for i in sample.tolist():
        tally.compare(_rows(whole, slice(i, i + 1)), call(slice(i, i + 1)), np.array([i]), "called alone",
                      ("in batch", "alone"))
    return tally


def check_splits(call: Call, whole: Outputs, sizes: list[int], n: int, ulp: int) -> CheckTally:
    """I2: for each size, the batch called in consecutive chunks of it, the outputs concatenated."""
    tally = CheckTally(ulp)
    for size in sizes:
        parts = [call(slice(a, min(a + size, n))) for a in range(0, n, size)]
        joined = {name: np.concatenate([p[name] for p in parts]) for name in whole}
        tally.compare(whole, joined, np.arange(n), f"chunks of {size}", ("whole", f"split {size}"))
    return tally


def mates_for(i: int, n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A batch of ``n`` rows holding row ``i`` at a seeded position, its mates drawn (with replacement) from
    the other rows: other inputs around it, of the size the whole batch was called at. The position too."""
    others = np.delete(np.arange(n), i)
    batch = others[rng.integers(0, others.size, size=n)]
    at = int(rng.integers(0, n))
    batch[at] = i
    return batch, at


def check_mates(call: Call, whole: Outputs, sample: np.ndarray, n: int, rng: np.random.Generator, ulp: int
                ) -> CheckTally:
    """I3: the batch permuted then put back in order, and each sampled row among drawn mates, give the
    whole batch's cells."""
    tally = CheckTally(ulp)
    perm = rng.permutation(n)
    tally.compare(_rows(whole, perm), call(perm), perm, "the batch permuted", ("in batch", "permuted"))
    for i in sample.tolist():
        batch, at = mates_for(i, n, rng)
        got = _rows(call(batch), slice(at, at + 1))
        tally.compare(_rows(whole, slice(i, i + 1)), got, np.array([i]),
                      f"at position {at} among rows drawn from the others", ("in batch", "among other rows"))
    return tally


def passed_detail(tally: CheckTally, what: str) -> str:
    """A passing check's detail: what was compared, and how close."""
    cells = sum(t.cells for t in tally.outputs.values())
    differing = sum(t.differing for t in tally.outputs.values())
    how = "bit-identical" if not differing else f"{differing} differ, all within {tally.ulp} ULP"
    return f"{what}: {cells} cells {how}"
