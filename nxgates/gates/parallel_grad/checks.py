"""parallel-grad's checks: their names (as the seed prints them) and how T1 and the pool's checks judge."""

from __future__ import annotations

from nxgates.core.bits import BitComparison
from nxgates.core.pool import TaskRecord, WaitResult

T1 = "T1 parallel grads BIT-IDENTICAL to serial (all B examples)"
T2 = "T2 pool ran all B tasks on >1 worker"
T3 = "T3 deterministic (re-run parallel identical)"
#: bit for bit, or with ``--ulp N`` within N ULPs: the detail says which held (BIT-IDENTICAL only when no cell
#: differs)
T4 = "T4 grads as in the saved file (bit for bit, or within --ulp)"
CHECKS = (T1, T2, T3, T4)


def judge_t1(cmp: BitComparison, B: int, n_params: int) -> tuple[bool, str]:
    """T1: no bit differs, and the comparison is not vacuous (more non-zero cells than one example has)."""
    if cmp.mismatches:
        return False, f"{cmp.mismatches} mismatching cells"
    if cmp.nonzero <= n_params:
        return False, f"vacuous: only {cmp.nonzero} non-zero cells"
    return True, f"{B} examples x {n_params} cells, {cmp.nonzero} non-zero"


def pool_problems(records: list[TaskRecord], waited: WaitResult, B: int, distinct: int | None, n_workers: int
                  ) -> list[str]:
    """What went wrong with a pass's tasks (T2, T3): raised, lost, or all on one worker."""
    failed = [r for r in records if r.error]
    lost = [r for r in records if not r.done]
    problems = [f"{r.label} raised {r.error}" for r in failed[:3]]
    if lost:
        why = "timed out waiting" if waited.timed_out else "the pool went idle"
        problems.append(f"{len(lost)} task(s) never completed ({why}): {', '.join(r.label for r in lost[:5])}")
    if distinct is not None and distinct <= 1:
        problems.append(f"all tasks ran on {distinct} worker of {n_workers}")
    return problems
