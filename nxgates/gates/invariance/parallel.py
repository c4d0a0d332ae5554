"""I4: the batch's chunks called on a worker pool, two passes over them, against the same chunks called
serially. A target that keeps state per thread or per process, or shares a buffer between concurrent
calls, gives other bits on some worker; the line names it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from nxgates.core.pool import make_pool, resolve
from nxgates.errors import GateTimeout
from nxgates.gatekit import RunContext
from nxgates.gates.invariance.calls import Batch, Caller, ContractError, Outputs, TargetError, normalize, rows_text
from nxgates.gates.invariance.compare import CheckTally
from nxgates.gates.invariance.faults import WorkerState

#: passes over the chunks: a worker's later calls are where state it kept shows
PASSES = 2


@dataclass
class PoolJob:
    """What the pool's tasks share: the target, the batch, and the planted faults' wrappers."""

    fn: Any
    batch: Batch
    plant: Any = None  #: the serial calls' fault wrapper, planted in the workers' calls too
    worker_state: WorkerState | None = None

    def __getstate__(self) -> dict:
        """To a remote worker: the target by value where no other process can import it."""
        from nxgates.gates.invariance.target import portable

        return {**self.__dict__, "fn": portable(self.fn)}


@dataclass
class PoolResult:
    tally: CheckTally
    workers: int
    distinct: int
    executor: str
    calls: int
    seconds: float  #: inside the target, summed over the workers
    problems: list[str]


def chunk_bounds(n: int, workers: int) -> list[tuple[int, int]]:
    """Consecutive chunks, two per worker where the batch has the rows (never fewer than two chunks)."""
    size = max(1, n // (2 * workers))
    return [(a, min(a + size, n)) for a in range(0, n, size)]


def run_chunk(ctx: tuple[Any, int, int], worker: int) -> tuple[Outputs, float]:
    """Pool task: the target on rows ``start .. stop-1``; its outputs and the seconds inside it."""
    handle, start, stop = ctx
    job = resolve(handle)
    kwargs = job.batch.kwargs(slice(start, stop))
    t0 = time.perf_counter()
    try:
        result = job.fn(**kwargs)
    except SystemExit as exc:  # a target's sys.exit ends neither the worker nor the gate: it is its error
        raise RuntimeError(f"SystemExit: {exc.code!r}") from None
    seconds = time.perf_counter() - t0
    outputs = normalize(result, stop - start)
    if job.plant is not None:
        outputs = job.plant(outputs, stop - start)
    if job.worker_state is not None:
        outputs = job.worker_state(outputs, worker)
    return outputs, seconds


def check_parallel(ctx: RunContext, job: PoolJob, serial: Caller, executor: str, workers: int, ulp: int
                   ) -> PoolResult:
    """I4: the chunks on the pool (``PASSES`` times), each compared with the serial call of the same rows."""
    n = job.batch.n
    pool = make_pool(executor, workers)
    try:
        handle = pool.register(job)
        bounds = chunk_bounds(n, pool.n_workers)
        results: dict[int, tuple[Outputs, float]] = {}
        first = len(pool.records)
        for _ in range(PASSES):
            for start, stop in bounds:
                pool.submit(run_chunk, (handle, start, stop), label=rows_text(slice(start, stop), n),
                            on_result=partial(results.__setitem__, len(pool.records)))
        _wait(ctx, pool, first + PASSES * len(bounds))
        records = pool.records[first:]
        for r in records:
            if r.error is not None:
                raise TargetError(_pool_error(r.error, r.label, r.worker))
        tally = CheckTally(ulp)
        expected = serial.serially(lambda: {b: serial(slice(*b)) for b in bounds})
        for k, r in enumerate(records):
            if k + first not in results:
                continue
            start, stop = bounds[k % len(bounds)]
            serial.check_signature(results[k + first][0], f"{r.label} (worker {r.worker})")
            tally.compare(expected[(start, stop)], results[k + first][0], np.arange(start, stop),
                          f"worker {r.worker}, pass {k // len(bounds) + 1}", ("serial", f"worker {r.worker}"))
        distinct = pool.workers_used(records)
        problems = []
        lost = [r.label for r in records if not r.done]
        if lost:
            problems.append(f"{len(lost)} call(s) never completed: {', '.join(lost[:4])}")
        if len(distinct) <= 1:
            problems.append(f"all calls ran on {len(distinct)} worker of {pool.n_workers}")
        return PoolResult(tally, pool.n_workers, len(distinct), pool.kind, len(results),
                          sum(s for _, s in results.values()), problems)
    finally:
        pool.close()


def _wait(ctx: RunContext, pool: Any, target: int) -> None:
    """Wait for the calls in slices, so the deadline holds (a call that never returns is a timeout)."""
    while True:
        waited = pool.wait(target, 0.2)
        if waited.reached or not waited.timed_out:
            return
        if ctx.remaining() is not None and ctx.remaining() <= 0:
            raise GateTimeout("timed out")


def _pool_error(error: str, label: str, worker: int) -> str:
    """A pool call's error as the gate error's line."""
    kind = f"{ContractError.__name__}: "
    if error.startswith(kind):
        return f"target broke the contract on {label} (worker {worker}): {error[len(kind):]}"
    return f"target raised {error} (call on {label}, worker {worker})"
