"""How parallel-grad's faults are planted: which examples drift and by how much, which tasks meet the
barrier, the pool overrides, and the shared arena on the pool's or the host's memory."""

import threading
from types import SimpleNamespace

import numpy as np

from nxgates.core.mlp import Dims
from nxgates.core.tape import F32, tree_sum
from nxgates.gates.parallel_grad import faults
from nxgates.gates.parallel_grad.faults import (
    BARRIER_SECONDS,
    DRIFTING_EXAMPLE,
    FAULTS,
    POOL_FAULTS,
    DropTask,
    PlantedHooks,
    SingleWorker,
    drift,
    plant_shared_arena,
    serial_hooks,
    task_hooks,
)


def job(fault=None, barrier=None):
    return SimpleNamespace(dims=Dims(3, 4, 2), fault=fault, shared_arena=None, barrier=barrier, first_done=set(),
                           evaluations={}, lock=threading.Lock(), reduce=tree_sum)


class CountingBarrier:
    def __init__(self):
        self.waits = 0

    def wait(self):
        self.waits += 1


def test_the_fault_table():
    assert sorted(FAULTS) == ["drop-task", "nondeterministic", "shared-arena", "single-worker"]
    assert FAULTS["shared-arena"].caught_by == (faults.T1,)
    assert FAULTS["single-worker"].caught_by == FAULTS["drop-task"].caught_by == (faults.T2,)
    assert FAULTS["nondeterministic"].caught_by == (faults.T3,)
    assert {"single-worker": SingleWorker, "drop-task": DropTask} == POOL_FAULTS
    assert (BARRIER_SECONDS, DRIFTING_EXAMPLE) == (10.0, 1)


def test_single_worker_deals_every_task_to_worker_0():
    assert [SingleWorker().worker_for(t) for t in range(5)] == [0, 0, 0, 0, 0]


def test_drop_task_refuses_only_the_task_after_one_round_of_workers():
    dropper = DropTask()
    dropper.n_workers = 3
    assert [t for t in range(10) if not dropper.accepts(t)] == [4]


def test_no_drift_without_the_nondeterministic_fault():
    j = job()
    assert [drift(j, b) for b in range(3)] == [0, 0, 0]
    j = job("shared-arena")
    assert drift(j, DRIFTING_EXAMPLE) == 0 and j.evaluations == {}


def test_only_the_drifting_example_drifts_one_more_each_evaluation():
    j = job("nondeterministic")
    assert [drift(j, 1) for _ in range(4)] == [0, 1, 2, 3]
    assert [drift(j, b) for b in (0, 2, 3)] == [0, 0, 0]
    assert j.evaluations == {1: 4}


def test_serial_hooks_are_none_until_the_example_has_drifted():
    j = job("nondeterministic")
    assert serial_hooks(j, 1) is None  # first evaluation: drift 0
    hooks = serial_hooks(j, 1)
    assert isinstance(hooks, PlantedHooks) and (hooks.drift, hooks.barrier) == (1, None)
    assert serial_hooks(j, 1).drift == 2
    assert serial_hooks(j, 0) is None
    assert serial_hooks(job(), 1) is None


def test_task_hooks_are_none_in_a_clean_run():
    j = job()
    assert [task_hooks(j, b, w) for b in range(3) for w in range(2)] == [None] * 6
    assert j.first_done == set()


def test_each_workers_first_task_meets_the_barrier_once():
    barrier = CountingBarrier()
    j = job("shared-arena", barrier)
    first = task_hooks(j, 0, worker=0)
    assert (first.drift, first.barrier) == (0, barrier)
    assert task_hooks(j, 1, worker=0) is None  # worker 0 has met it
    other = task_hooks(j, 2, worker=1)
    assert other.barrier is barrier
    assert j.first_done == {0, 1}


def test_task_hooks_carry_the_drift_of_the_drifting_example():
    j = job("nondeterministic")
    assert task_hooks(j, 1, 0) is None
    hooks = task_hooks(j, 1, 1)
    assert (hooks.drift, hooks.barrier) == (1, None)
    assert task_hooks(j, 0, 0) is None


def test_drift_and_barrier_together():
    barrier = CountingBarrier()
    j = job("nondeterministic", barrier)
    j.evaluations[1] = 5
    hooks = task_hooks(j, 1, 3)
    assert (hooks.drift, hooks.barrier) == (5, barrier)


class FakeTape:
    def __init__(self, values):
        self.values = {7: np.array(values, F32)}

    def val(self, node):
        return self.values[node]


def test_the_hidden_layer_drifts_by_thousandths():
    tape = FakeTape([1.0, -2.0, 0.5])
    PlantedHooks(3).after_hidden(tape, 7)
    expected = np.array([1.0, -2.0, 0.5], F32) + F32(3) * F32(0.001)
    assert tape.val(7).tobytes() == expected.tobytes()
    assert tape.val(7)[0] > 1.0


def test_no_drift_leaves_the_hidden_layer_alone():
    tape = FakeTape([1.0, -2.0])
    PlantedHooks(0).after_hidden(tape, 7)
    assert tape.val(7).tolist() == [1.0, -2.0]


def test_the_barrier_is_waited_for_before_backward_only_when_given():
    barrier = CountingBarrier()
    PlantedHooks(0, barrier).before_backward()
    assert barrier.waits == 1
    PlantedHooks(2).before_backward()  # no barrier: nothing to wait for
    hooks = PlantedHooks(4, barrier)
    assert (hooks.drift, hooks.barrier) == (4, barrier)
    assert PlantedHooks(1).barrier is None


class Maker:
    """A pool or the host's files: records the arrays and barriers made."""

    def __init__(self, remote=False, n_workers=2):
        self.remote, self.n_workers = remote, n_workers
        self.arrays, self.barriers = [], []

    def array(self, shape):
        self.arrays.append(shape)
        return np.full(shape, 9, F32)

    def barrier(self, parties, timeout):
        self.barriers.append((parties, timeout))
        return ("barrier", parties)


def _planted(pool, host, chunk):
    j = job("shared-arena")
    j.reduce = object()
    plant_shared_arena(j, pool, host, chunk)
    return j


def test_a_local_pool_makes_the_shared_arena_and_barrier():
    pool, host = Maker(n_workers=4), Maker()
    j = _planted(pool, host, chunk=8)
    arena = j.dims.arena
    assert pool.arrays == [(arena,), (arena,)] and host.arrays == []
    assert pool.barriers == [(4, BARRIER_SECONDS)] and host.barriers == []
    assert j.barrier == ("barrier", 4)
    tape = j.shared_arena
    assert tape.capacity == arena and tape.reduce is j.reduce
    assert tape.vals is not tape.grads and tape.vals.shape == tape.grads.shape == (arena,)
    assert (tape.vals == 9).all() and (tape.grads == 9).all()


def test_the_barrier_waits_for_no_more_tasks_than_a_chunk_has():
    pool = Maker(n_workers=4)
    j = _planted(pool, Maker(), chunk=3)
    assert pool.barriers == [(3, BARRIER_SECONDS)] and j.barrier == ("barrier", 3)


def test_a_remote_pool_makes_them_in_host_memory():
    pool, host = Maker(remote=True, n_workers=2), Maker()
    j = _planted(pool, host, chunk=6)
    arena = j.dims.arena
    assert host.arrays == [(arena,), (arena,)] and pool.arrays == []
    assert host.barriers == [(2, BARRIER_SECONDS)] and pool.barriers == []
    assert j.barrier == ("barrier", 2)
    tape = j.shared_arena
    assert tape.capacity == arena and tape.reduce is j.reduce and tape.vals is not tape.grads
    assert (tape.vals == 9).all() and (tape.grads == 9).all()
