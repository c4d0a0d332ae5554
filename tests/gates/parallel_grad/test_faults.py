"""parallel-grad's pool faults, planted through the pool's override points: one worker takes every task, or a
task is dropped (reported at once, not waited for)."""

import time

from nxgates.core.pool import make_pool
from nxgates.gates.parallel_grad.faults import DropTask, SingleWorker


def noop(ctx, worker):
    return None


def test_single_worker_fault_puts_everything_on_worker_0():
    with make_pool("thread", 2, SingleWorker) as pool:
        for b in range(6):
            pool.submit(noop, b)
        assert pool.wait(6, timeout=30).reached
        assert pool.workers_used(pool.records) == {0}


def test_dropped_task_is_reported_at_once_not_waited_for():
    with make_pool("thread", 2, DropTask) as pool:
        for b in range(8):
            pool.submit(noop, b, label=f"example {b}")
        t0 = time.monotonic()
        res = pool.wait(8, timeout=60)
        assert time.monotonic() - t0 < 5
        assert not res.reached and not res.timed_out
        assert [r.label for r in pool.records if not r.done] == ["example 3"]
