"""The task loop every worker process runs, forked or on a Dask cluster: each task of a batch in turn, its
failure told as text in its place, so one failure does not stop the rest and the text needs no unpickling
in the gate's process."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable
from typing import Any

#: a task as it travels to a worker: the function and its context
Task = tuple[Callable[[Any, int], Any], Any]
#: what a task came to: (error text or None, value)
Outcome = tuple[str | None, Any]


def describe(exc: BaseException) -> str:
    """An exception as a task record shows it."""
    return f"{type(exc).__name__}: {exc}"


def run_tasks(tasks: Iterable[Task], worker: int) -> list[Outcome]:
    """Run each task as ``fn(ctx, worker)``: (None, value) or (error text, None) per task, in order."""
    outcomes: list[Outcome] = []
    for fn, ctx in tasks:
        try:
            outcomes.append((None, fn(ctx, worker)))
        except Exception as exc:  # reported per task; a BaseException (sys.exit) is the caller's
            outcomes.append((describe(exc), None))
    return outcomes


def sendable(outcome: Outcome) -> Outcome:
    """``outcome`` if it pickles, else its task's failure saying why (checked once a batch's whole answer
    would not pickle, so a good answer is pickled once)."""
    try:
        pickle.dumps(outcome, pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        return f"the task's result cannot be sent back: {describe(exc)}", None
    return outcome
