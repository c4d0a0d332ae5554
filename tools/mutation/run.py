"""``mutmut`` itself, started so that processes spawned under it can start too, with each mutant's tests fastest first.

Dask's nanny starts its workers with multiprocessing's *spawn*, which re-runs the parent's main script in each
new process. ``.venv/bin/mutmut`` imports mutmut at the top, and mutmut reads its configuration on import, from
the working directory: a test that ran from a temporary directory then spawned workers that died looking for
it. Here mutmut is imported only when this file is the main script, never when a worker re-runs it.

mutmut runs a mutant's tests with ``pytest -x`` in the order of a set, so a mutant that a 5 ms unit test kills
may first wait for a 10 s test of a whole gate. Sorting each mutant's tests by the durations mutmut measured
changes no verdict (the same tests run until the first failure) and makes most kills cost milliseconds.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping


def fastest_first(tests: list[str], duration_by_test: Mapping[str, float]) -> list[str]:
    """The tests, quickest first; a test without a measured duration goes last, ties by name."""
    return sorted(tests, key=lambda test: (duration_by_test.get(test, float("inf")), test))


def _submitting_fastest_first(submit: Callable, durations: Callable[[], Mapping[str, float]]) -> Callable:
    def submit_fastest_first(self, mutant_name: str, tests: list[str], cpu_time_limit: int,
                             estimated_time: float) -> None:
        return submit(self, mutant_name, fastest_first(list(tests), durations()), cpu_time_limit, estimated_time)

    return submit_fastest_first


def main() -> int:
    from mutmut.__main__ import cli
    from mutmut.state import state
    from mutmut.workers import isolation

    for runner in (isolation.ForkServerRunner, isolation.ForkRunner):
        runner.submit = _submitting_fastest_first(runner.submit, lambda: state().duration_by_test)
    return cli()


if __name__ == "__main__":
    sys.exit(main())
