"""Calling the target: keyword arrays in, its outputs checked against the contract and copied out, every
call repeated for I5, timed, counted, and bounded by the run's deadline.

The contract: the target takes keyword arrays; static arrays whole, every other one a slice of rows on axis
0. It returns one array, or a dict (names as given) or tuple (names ``[0]``, ``[1]`` ...) of arrays, each
with a leading axis of the rows it was given. Breaking it, or raising, is the gate's error (exit 1), never a
check's verdict: nothing about invariance can be said of a call that did not answer.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from nxgates.deadline import THREAD_PREFIX
from nxgates.errors import ConfigError, GateError, GateTimeout
from nxgates.gates.invariance.compare import CheckTally

Outputs = dict[str, np.ndarray]
#: dtype kinds an output may have: bool, integers, floats, complex
OUTPUT_KINDS = "biufc"


class TargetError(GateError):
    """The target raised or broke the contract: the gate's error (exit 1), never a crash of nxgates."""


class ContractError(Exception):
    """An output the contract does not allow (raised where the call ran, a pool worker included)."""


@dataclass
class Batch:
    """The arrays a target is called with: those sliced by rows (all of ``n`` rows) and the static ones."""

    batched: dict[str, np.ndarray]
    static: dict[str, np.ndarray]
    n: int

    def kwargs(self, rows: np.ndarray | slice) -> dict[str, np.ndarray]:
        """The keyword arrays of a call on ``rows`` (a slice gives views, indices copies)."""
        return {**{k: a[rows] for k, a in self.batched.items()}, **self.static}


def split_batch(arrays: dict[str, np.ndarray], static: tuple[str, ...], where: str) -> Batch:
    """The arrays as batched and static ones; a static name with no array, batched arrays of unequal rows,
    or none batched, is a usage error (before any call)."""
    names = ", ".join(arrays) or "none"
    for name in static:
        if name not in arrays:
            raise ConfigError(f"static={','.join(static)}: {where} has no array {name!r} (arrays: {names})")
    batched = {k: a for k, a in arrays.items() if k not in static}
    if not batched:
        raise ConfigError(f"static={','.join(static)}: every array of {where} is static; at least one must be "
                          "batched on axis 0")
    lengths: dict[int, str] = {}
    for name, a in batched.items():
        if a.ndim == 0:
            raise ConfigError(f"{where}: array {name!r} is a scalar: name it in static= to pass it whole")
        lengths.setdefault(a.shape[0], name)
    if len(lengths) > 1:
        (n1, a1), (n2, a2) = list(lengths.items())[:2]
        raise ConfigError(f"{where}: batched arrays {a1!r} ({n1} rows) and {a2!r} ({n2} rows) differ on axis 0; "
                          "name the arrays passed whole in static=")
    n = next(iter(lengths))
    if n < 2:
        raise ConfigError(f"{where}: the batch has {n} row(s); the checks need at least 2 (I4: one call per "
                          "worker)")
    for a in arrays.values():
        a.setflags(write=False)  # a target that writes into its inputs raises, instead of moving later calls
    return Batch(batched, {k: arrays[k] for k in static}, n)


def rows_text(rows: np.ndarray | slice, n: int) -> str:
    """How a line names the rows of a call."""
    if isinstance(rows, slice):
        return f"rows {rows.start}..{rows.stop - 1} of {n}"
    shown = ", ".join(map(str, rows[:6].tolist())) + (", ..." if rows.size > 6 else "")
    return f"rows [{shown}] ({rows.size} of {n})"


def normalize(result: Any, n: int) -> Outputs:
    """The target's return value as named arrays, copied (a buffer it reuses must not move earlier results)."""
    if isinstance(result, dict):
        items = list(result.items())
        if not all(isinstance(k, str) for k, _ in items):
            raise ContractError("returned a dict whose keys are not all strings")
    elif isinstance(result, tuple | list):
        items = [(f"[{k}]", v) for k, v in enumerate(result)]
    else:
        items = [("out", result)]
    if not items:
        raise ContractError("returned no arrays")
    outputs = {}
    for name, value in items:
        try:
            a = np.array(value, copy=True)
        except Exception as exc:
            raise ContractError(f"output {name!r} is not an array ({type(exc).__name__}: {exc})") from None
        if a.dtype.kind not in OUTPUT_KINDS:
            raise ContractError(f"output {name!r} has dtype {a.dtype} (numbers or bools only)")
        if a.ndim == 0 or a.shape[0] != n:
            raise ContractError(f"output {name!r} has shape {a.shape}: its leading axis must be the {n} rows "
                                "given")
        outputs[name] = a
    return outputs


def signature(outputs: Outputs) -> tuple:
    """What every call's outputs must share: names, dtypes and the shape past the rows."""
    return tuple((name, a.dtype.str, a.shape[1:]) for name, a in outputs.items())


class CallThread:
    """Serial calls under a deadline: they run on one helper thread while the gate waits for them in slices,
    so a call that never returns is a timeout. Python cannot stop a thread: a stuck one is left behind as a
    daemon, named so the console script knows it (:mod:`nxgates.deadline`).

    A job may be a whole sequence of calls (a check's, or several checks'): what it calls through
    :meth:`call` runs on the helper directly, so the sequence crosses between threads once, not per call.
    Once :meth:`close` is called, the calls a job had still to make raise :class:`GateTimeout` instead
    (a gate that stopped waiting for it, timed out or interrupted, leaves no work running behind it)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self.closed = False

    def call(self, fn: Callable[[], Any], deadline: float | None) -> Any:
        if deadline is None or threading.current_thread() is self._thread:
            if self.closed:
                raise GateTimeout("the run ended before this call")
            return fn()
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name=f"{THREAD_PREFIX}invariance-target",
                                            daemon=True)
            self._thread.start()
        future: Future = Future()
        self._jobs.put((fn, future))
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise GateTimeout("timed out")
            try:
                return future.result(timeout=min(0.1, left))
            except TimeoutError:
                continue

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, future = job
            try:
                future.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - SystemExit too: carried to the gate
                future.set_exception(exc)

    def close(self) -> None:
        self.closed = True
        if self._thread is not None:
            self._jobs.put(None)


class Caller:
    """The gate's serial calls of the target: each made ``repeat`` times (I5 compares them), the first
    answer returned. Counts the calls and the seconds spent inside the target."""

    def __init__(self, fn: Callable[..., Any], batch: Batch, repeat: int, ulp: int, deadline: float | None,
                 plant: Callable[[Outputs, int], Outputs] | None = None):
        self.fn, self.batch, self.repeat, self.deadline, self.plant = fn, batch, repeat, deadline, plant
        self.determinism = CheckTally(ulp)  #: I5
        self.calls = 0
        self.seconds = 0.0
        self.signature: tuple | None = None
        self._thread = CallThread()

    def __call__(self, rows: np.ndarray | slice) -> Outputs:
        """The outputs of a call on ``rows`` of the batch (a slice, or row indices in the call's order)."""
        n = len(range(self.batch.n)[rows]) if isinstance(rows, slice) else int(rows.size)
        index = np.arange(self.batch.n)[rows]
        where = rows_text(rows, self.batch.n)
        first: Outputs | None = None
        for k in range(self.repeat):
            got = self.one(rows, n, where)
            if first is None:
                first = got
            else:
                self.determinism.compare(first, got, index, f"{where}, call {k + 1}", ("call 1", f"call {k + 1}"))
        assert first is not None
        return first

    def serially(self, calls: Callable[[], Any]) -> Any:
        """``calls()`` (a sequence of this caller's calls and what is made of them) on the helper thread, under
        the deadline: its result, or what it raised, raised here."""
        return self._thread.call(calls, self.deadline)

    def one(self, rows: np.ndarray | slice, n: int, where: str) -> Outputs:
        """One call on ``rows`` (``n`` of them; ``where`` names them in a line)."""
        kwargs = self.batch.kwargs(rows)
        t0 = time.perf_counter()
        try:
            result = self._thread.call(lambda: self.fn(**kwargs), self.deadline)
            outputs = normalize(result, n)
        except (GateTimeout, KeyboardInterrupt):
            raise
        except (Exception, SystemExit) as exc:  # the target's own error: the gate's, named with the call
            raise TargetError(target_error(exc, where)) from None
        finally:
            self.seconds += time.perf_counter() - t0
            self.calls += 1
        self.check_signature(outputs, where)
        return outputs if self.plant is None else self.plant(outputs, n)

    def check_signature(self, outputs: Outputs, where: str) -> None:
        """Every call's outputs have the first call's names, dtypes and shapes past the rows."""
        sig = signature(outputs)
        if self.signature is None:
            self.signature = sig
        elif sig != self.signature:
            raise TargetError(f"target returned {describe(sig)} for {where}, but {describe(self.signature)} "
                              "before")

    def close(self) -> None:
        self._thread.close()


def target_error(exc: BaseException, where: str) -> str:
    """The gate error's line for what a call raised (or the contract it broke)."""
    if isinstance(exc, ContractError):
        return f"target broke the contract on {where}: {exc}"
    text = " ".join(str(exc).split()) or "(no message)"
    return f"target raised {type(exc).__name__}: {text} (call on {where})"


def describe(sig: tuple) -> str:
    """Outputs' names, dtypes and shapes, as a line shows them: ``y float32 (n, 4)``."""
    return ", ".join(f"{name} {np.dtype(dt)} (n{''.join(f', {d}' for d in shape)})" for name, dt, shape in sig)
