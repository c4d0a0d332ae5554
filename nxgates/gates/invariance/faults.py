"""invariance's planted faults: each wraps the target's outputs (the target itself is never edited), so
they plant the same on the built-in target and on a user's.

A step of a dtype (:func:`step`) is one ULP of a float (towards +inf), one of an integer, or a bool's value
negated; mate-leak adds a share of the batch's mean instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from nxgates.gatekit import Fault
from nxgates.gates.invariance.checks import I1, I2, I3, I4, I5

FAULTS = {
    "batch-size": Fault("every cell of a call with more than one row moves by 1 ULP (a GEMM where one row is a "
                        "GEMV)", (I1, I2)),
    "mate-leak": Fault("2^-20 of the batch's mean over rows is added to each row (a norm across the batch)", (I3,)),
    "worker-state": Fault("a pool worker's call counter moves its later calls' first cell (stale per-thread state)",
                          (I4,)),
    "nondeterministic": Fault("the run's second call flips the last bit of its first cell", (I5,)),
}
#: the share of the batch's mean mate-leak adds
LEAK = 2.0**-20
#: the call (0-based, in the order the gate makes them) whose first cell nondeterministic flips: the repeat
#: of the gate's first call
FLIPPED_CALL = 1

Outputs = dict[str, np.ndarray]


def step(a: np.ndarray) -> np.ndarray:
    """``a`` moved by one step of its dtype, every cell."""
    if a.dtype.kind in "fc":
        return np.nextafter(a, np.inf) if a.dtype.kind == "f" else a + np.finfo(a.real.dtype).eps
    if a.dtype.kind == "b":
        return ~a
    return a + np.ones((), a.dtype)


def flip_last_bit(a: np.ndarray) -> None:
    """The lowest bit of cell 0 flipped, in place (a float's last mantissa bit)."""
    a.reshape(-1)[:1].view(np.uint8)[:1] ^= 1  # little-endian: a cell's first byte holds its lowest bit


def mate_leak(a: np.ndarray) -> np.ndarray:
    """Each row plus 2^-20 of the mean over the call's rows (for integers and bools: the parity of the sum)."""
    if a.dtype.kind in "fc":
        return a + (a.mean(axis=0) * LEAK).astype(a.dtype)
    total = np.sum(a, axis=0, dtype=np.int64) & 1
    return a ^ total.astype(bool) if a.dtype.kind == "b" else a + total.astype(a.dtype)


class Planted:
    """What a fault does to a call's outputs (``rows``: the rows the call was given), wherever it runs."""

    def __init__(self, fault: str | None):
        self.fault = fault
        self.calls = 0
        self.lock = threading.Lock()

    def __getstate__(self) -> dict:
        """To a remote worker (dask): the fault and its count, never this process's lock."""
        return {"fault": self.fault, "calls": self.calls}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, lock=threading.Lock())

    def __call__(self, outputs: Outputs, rows: int) -> Outputs:
        if self.fault == "batch-size" and rows > 1:
            return {name: step(a) for name, a in outputs.items()}
        if self.fault == "mate-leak":
            return {name: mate_leak(a) for name, a in outputs.items()}
        if self.fault == "nondeterministic":
            with self.lock:
                call, self.calls = self.calls, self.calls + 1
            if call == FLIPPED_CALL:
                flip_last_bit(next(iter(outputs.values())))
        return outputs


class WorkerState:
    """worker-state, in a pool task: from a worker's second call on, the first cell of its outputs moves."""

    def __init__(self) -> None:
        self.calls: dict[int, int] = {}  #: per worker; each worker updates its own entry only

    def __call__(self, outputs: Outputs, worker: int) -> Outputs:
        n = self.calls.get(worker, 0)
        self.calls[worker] = n + 1
        if n:
            first = next(iter(outputs.values()))
            first.reshape(-1)[:1] = step(first.reshape(-1)[:1])
        return outputs


def planted(fault: str | None) -> Callable[[Outputs, int], Outputs] | None:
    """The serial and pool calls' wrapper of ``fault`` (None: nothing to plant there)."""
    return Planted(fault) if fault in ("batch-size", "mate-leak", "nondeterministic") else None
