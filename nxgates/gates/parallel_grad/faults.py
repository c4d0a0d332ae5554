"""parallel-grad's planted faults, each planted through a public extension point of the core: the pool's
:meth:`~nxgates.core.pool.Pool.worker_for` and :meth:`~nxgates.core.pool.Pool.accepts`
(overridden by a class :func:`~nxgates.core.pool.make_pool` puts in front of the executor's), and the
example pass's :class:`~nxgates.core.mlp.ExampleHooks`."""

from __future__ import annotations

import threading
from typing import Any, Protocol

from nxgates.core.mlp import Dims, ExampleHooks
from nxgates.core.pool import Pool
from nxgates.core.tape import F32, Node, Tape
from nxgates.gatekit import Fault
from nxgates.gates.parallel_grad.checks import T1, T2, T3
from nxgates.gates.parallel_grad.host_memory import HostFiles


class PlantedState(Protocol):
    """What the faults read and keep in the job (:class:`~nxgates.gates.parallel_grad.job.GradJob`)."""

    dims: Dims
    fault: str | None
    shared_arena: Tape | None
    barrier: Any
    first_done: set[int]
    evaluations: dict[int, int]
    lock: threading.Lock

FAULTS = {
    "shared-arena": Fault("every task uses one shared tape/arena; a barrier forces the tasks to overlap", (T1,)),
    "single-worker": Fault("the pool deals every task to worker 0", (T2,)),
    "nondeterministic": Fault("example 1's hidden layer drifts with the number of times it has been computed",
                              (T3,)),
    "drop-task": Fault("the pool accepts one task and never runs it", (T2,)),
}
#: how long the shared-arena fault's tasks wait for each other before the barrier breaks
BARRIER_SECONDS = 10.0
#: the example whose hidden layer drifts under the nondeterministic fault
DRIFTING_EXAMPLE = 1


class SingleWorker:
    """single-worker: every task is dealt to worker 0."""

    def worker_for(self, task: int) -> int:
        return 0


class DropTask:
    """drop-task: one task, on the second worker once every worker has had one, is recorded and never run."""

    n_workers: int

    def accepts(self, task: int) -> bool:
        return task != self.n_workers + 1


#: the class each pool fault puts in front of the pool's (None: the plain pool)
POOL_FAULTS: dict[str, type] = {"single-worker": SingleWorker, "drop-task": DropTask}


class PlantedHooks(ExampleHooks):
    """Inside one example's pass: the hidden layer drifts by ``drift`` thousandths (nondeterministic), and
    ``barrier`` holds the task twice (shared-arena): once every worker's first example has written its hidden
    layer to the one arena, so all but the last writer read another example's values on (whatever the
    scheduler does next), and again before the backward sweeps, so they also overlap on the gradients."""

    def __init__(self, drift: int, barrier: Any = None):
        self.drift, self.barrier = drift, barrier

    def after_hidden(self, tape: Tape, hidden: Node) -> None:
        if self.drift:
            tape.val(hidden)[...] += F32(self.drift) * F32(0.001)
        if self.barrier is not None:
            self.barrier.wait()

    def before_backward(self) -> None:
        if self.barrier is not None:
            self.barrier.wait()


def drift(job: PlantedState, b: int) -> int:
    """0 unless the nondeterministic fault is on: then example 1 drifts with each evaluation in this process."""
    if job.fault != "nondeterministic" or b != DRIFTING_EXAMPLE:
        return 0
    with job.lock:
        n = job.evaluations.get(b, 0)
        job.evaluations[b] = n + 1
    return n


def serial_hooks(job: PlantedState, b: int) -> PlantedHooks | None:
    """The serial pass's hooks for example ``b``: None in a clean run."""
    n = drift(job, b)
    return PlantedHooks(n) if n else None


def task_hooks(job: PlantedState, b: int, worker: int) -> PlantedHooks | None:
    """A pool task's hooks for example ``b``: None in a clean run. Under shared-arena each worker's first
    example waits at the barrier, so the workers' examples overlap on the one arena."""
    barrier = None
    if job.barrier is not None and worker not in job.first_done:
        job.first_done.add(worker)
        barrier = job.barrier
    n = drift(job, b)
    return PlantedHooks(n, barrier) if n or barrier is not None else None


def plant_shared_arena(job: PlantedState, pool: Pool, host: HostFiles, chunk: int) -> None:
    """shared-arena: one tape on memory every worker maps, and the barrier that makes the tasks overlap."""
    if pool.remote:
        vals, grads = host.array((job.dims.arena,)), host.array((job.dims.arena,))
        job.barrier = host.barrier(min(pool.n_workers, chunk), BARRIER_SECONDS)
    else:
        vals, grads = pool.array((job.dims.arena,)), pool.array((job.dims.arena,))
        job.barrier = pool.barrier(min(pool.n_workers, chunk), BARRIER_SECONDS)
    job.shared_arena = Tape(job.dims.arena, vals, grads, reduce=job.reduce)
