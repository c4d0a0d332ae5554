"""parallel-grad's judges: T1 on a bit comparison, and what went wrong with a pass's pool tasks (T2, T3)."""

from nxgates.core.bits import BitComparison
from nxgates.core.pool import TaskRecord, WaitResult
from nxgates.gates.parallel_grad import checks
from nxgates.gates.parallel_grad.checks import judge_t1, pool_problems


def waited(timed_out=False):
    return WaitResult(reached=False, timed_out=timed_out, finished=0)


def record(task, worker=0, done=True, error=None):
    return TaskRecord(task, worker, f"example {task}", done=done, error=error)


def test_check_names_are_the_seeds_lines():
    assert checks.T1 == "T1 parallel grads BIT-IDENTICAL to serial (all B examples)"
    assert checks.T2 == "T2 pool ran all B tasks on >1 worker"
    assert checks.T3 == "T3 deterministic (re-run parallel identical)"
    assert checks.T4 == "T4 grads as in the saved file (bit for bit, or within --ulp)"
    assert checks.CHECKS == (checks.T1, checks.T2, checks.T3, checks.T4)


def test_t1_fails_on_any_mismatch_even_with_many_nonzero_cells():
    assert judge_t1(BitComparison(1, 10_000, []), 8, 192) == (False, "1 mismatching cells")
    assert judge_t1(BitComparison(3, 0, []), 8, 192) == (False, "3 mismatching cells")


def test_t1_is_vacuous_up_to_one_examples_cells_and_passes_one_above():
    assert judge_t1(BitComparison(0, 192, []), 8, 192) == (False, "vacuous: only 192 non-zero cells")
    assert judge_t1(BitComparison(0, 191, []), 8, 192) == (False, "vacuous: only 191 non-zero cells")
    assert judge_t1(BitComparison(0, 193, []), 8, 192) == (True, "8 examples x 192 cells, 193 non-zero")
    assert judge_t1(BitComparison(0, 0, []), 2, 5) == (False, "vacuous: only 0 non-zero cells")


def test_a_clean_pass_on_several_workers_has_no_problems():
    records = [record(b, worker=b % 2) for b in range(4)]
    assert pool_problems(records, waited(), 4, 2, 2) == []
    assert pool_problems(records, waited(), 4, None, 2) == []


def test_raised_tasks_are_named_up_to_three():
    records = [record(b, error=f"boom {b}") for b in range(5)] + [record(5)]
    assert pool_problems(records, waited(), 6, 2, 2) == [
        "example 0 raised boom 0", "example 1 raised boom 1", "example 2 raised boom 2"]


def test_lost_tasks_are_counted_and_named_up_to_five_with_why():
    records = [record(b, done=b < 1) for b in range(8)]
    lost = "example 1, example 2, example 3, example 4, example 5"
    assert pool_problems(records, waited(), 8, 2, 2) == [f"7 task(s) never completed (the pool went idle): {lost}"]
    assert pool_problems(records, waited(timed_out=True), 8, 2, 2) == [
        f"7 task(s) never completed (timed out waiting): {lost}"]


def test_a_raised_task_that_also_never_completed_is_reported_twice_in_order():
    records = [record(0, done=False, error="died"), record(1)]
    assert pool_problems(records, waited(), 2, 2, 2) == [
        "example 0 raised died", "1 task(s) never completed (the pool went idle): example 0"]


def test_one_distinct_worker_is_a_problem_two_is_not():
    records = [record(b) for b in range(3)]
    assert pool_problems(records, waited(), 3, 1, 4) == ["all tasks ran on 1 worker of 4"]
    assert pool_problems(records, waited(), 3, 0, 4) == ["all tasks ran on 0 worker of 4"]
    assert pool_problems(records, waited(), 3, 2, 4) == []


def test_every_kind_of_problem_is_listed_raised_then_lost_then_workers():
    records = [record(0, error="x"), record(1, done=False)]
    assert pool_problems(records, waited(), 2, 1, 2) == [
        "example 0 raised x", "1 task(s) never completed (the pool went idle): example 1",
        "all tasks ran on 1 worker of 2"]
