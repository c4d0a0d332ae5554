"""The task loop every worker process runs (forked and Dask): each task in turn with its context and worker,
a failure told as text in its place, a BaseException left to the caller, and outcomes that cannot be
pickled failing alone."""

import sys
import threading

import pytest

from nxgates.core.pool.tasks import describe, run_tasks, sendable
from tests.helpers import add, fail_on_two


def leave(ctx, worker):
    sys.exit(ctx)


def test_a_batch_runs_every_task_with_its_context_and_worker():
    assert run_tasks([(add, 1), (add, 2), (add, 3)], 4) == [(None, 41), (None, 42), (None, 43)]
    assert run_tasks([], 0) == []
    assert run_tasks(iter([(add, 5)]), 0) == [(None, 5)]  # any iterable: claims arrive one at a time


def test_a_failing_task_is_reported_in_its_place_as_text_and_the_rest_still_run():
    assert run_tasks([(fail_on_two, 1), (fail_on_two, 2), (fail_on_two, 3)], 1) == [
        (None, 1), ("ValueError: task 2 on worker 1 failed", None), (None, 3)]


def test_a_task_that_leaves_through_a_base_exception_stops_the_loop():
    with pytest.raises(SystemExit):
        run_tasks([(add, 1), (leave, 3), (add, 2)], 0)


def test_an_exception_is_told_as_its_type_and_message():
    assert describe(KeyError("row 2")) == "KeyError: 'row 2'"
    assert describe(SystemExit(3)) == "SystemExit: 3"


def test_an_outcome_that_cannot_be_pickled_fails_its_task_saying_why():
    assert sendable((None, 7)) == (None, 7)
    assert sendable(("ValueError: x", None)) == ("ValueError: x", None)
    assert sendable((None, threading.Lock())) == (
        "the task's result cannot be sent back: TypeError: cannot pickle '_thread.lock' object", None)
