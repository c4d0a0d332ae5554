"""The process executor: forked workers, arrays in shared memory mapped before the workers start, nothing
large pickled. One module per job: how many workers (:mod:`.limits`), the messages (:mod:`.frames`), the
parent's handle on a worker (:mod:`.worker`), scheduling (:mod:`.pool`), claimable tasks (:mod:`.claims`),
the workers' lives and stop signals (:mod:`.lifecycle`) and the worker's own loop (:mod:`.child`).
"""

from __future__ import annotations

from nxgates.core.pool.forked.limits import PROCESS_WORKERS_PER_CPU, check_workers, max_process_workers
from nxgates.core.pool.forked.pool import ProcessWorkerPool

__all__ = ["PROCESS_WORKERS_PER_CPU", "ProcessWorkerPool", "check_workers", "max_process_workers"]
