"""``mutmut`` itself, started so that processes spawned under it can start too, with each mutant's tests fastest first.

Dask's nanny starts its workers with multiprocessing's *spawn*, which re-runs the parent's main script in each
new process. ``.venv/bin/mutmut`` imports mutmut at the top, and mutmut reads its configuration on import, from
the working directory: a test that ran from a temporary directory then spawned workers that died looking for
it. Here mutmut is imported only when this file is the main script, never when a worker re-runs it.

mutmut's fork server (``process_isolation = "forkserver"``, see pyproject.toml) runs a mutant's tests with
``pytest -x`` in the order of a set, so a mutant that a 5 ms unit test kills may first wait for a 10 s test of a
whole gate. Sorting each mutant's tests by the durations mutmut measured, as its plain fork runner does, changes
no verdict (the same tests run until the first failure) and makes most kills cost milliseconds.

A mutant that makes a pool wait forever is a timeout for mutmut only when every test of the function could have
run fifteen times over: half an hour for the tape's. Each test here has its own deadline instead, ten times its
measured duration plus half a minute; a test past it ends the mutant's run with mutmut's own exit code for a
timeout, which mutmut and the score count as detected, as they would the later one.

A mutant that ``tools/mutation/equivalents.toml`` names is marked skipped once mutmut has written the mutants and
before it picks which to run, so a first run in an empty ``mutants/`` skips them too (``retry.py`` can only mark
mutants that an earlier run wrote).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

TIMEOUT = 36  # mutmut's exit code for a run that took too long
DEADLINE_FLOOR_S = 30.0
DEADLINE_FACTOR = 10.0


def fastest_first(tests: list[str], duration_by_test: Mapping[str, float]) -> list[str]:
    """The tests, quickest first; a test without a measured duration goes last, ties by name."""
    return sorted(tests, key=lambda test: (duration_by_test.get(test, float("inf")), test))


def _submitting_fastest_first(submit: Callable, durations: Callable[[], Mapping[str, float]]) -> Callable:
    def submit_fastest_first(self, mutant_name: str, tests: list[str], cpu_time_limit: int,
                             estimated_time: float) -> None:
        return submit(self, mutant_name, fastest_first(list(tests), durations()), cpu_time_limit, estimated_time)

    return submit_fastest_first


def deadline_s(test: str, duration_by_test: Mapping[str, float]) -> float:
    """How long one test may take on a mutant: ten times its measured duration, and never under half a minute."""
    return DEADLINE_FLOOR_S + DEADLINE_FACTOR * duration_by_test.get(test, 0.0)


class TestDeadline:
    """A pytest plugin that ends the run as a timeout when one test (setup and teardown included) overruns.

    Before it leaves it writes the test's name and every thread's stack to ``<report_dir>/<mutant>.txt``, so a
    timeout can be read, not only counted.
    """

    def __init__(self, duration_by_test: Mapping[str, float], report_dir: Path = Path("timeouts")):
        self.duration_by_test = duration_by_test
        self.report_dir = report_dir
        self.test = ""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem) -> Iterator[None]:
        self.test = item.nodeid
        previous = signal.signal(signal.SIGALRM, self._end_as_timeout)
        signal.setitimer(signal.ITIMER_REAL, deadline_s(item.nodeid, self.duration_by_test))
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    def _end_as_timeout(self, signum, frame) -> None:
        """Leave at once: a hung test may hold locks or threads that an exception would never get past."""
        try:
            self.report_dir.mkdir(parents=True, exist_ok=True)
            mutant = os.environ.get("MUTANT_UNDER_TEST") or "no-mutant"
            with open(self.report_dir / f"{mutant}.txt", "w") as report:
                report.write(f"{self.test} passed its deadline of "
                             f"{deadline_s(self.test, self.duration_by_test):.0f} s\n")
                report.flush()
                faulthandler.dump_traceback(report, all_threads=True)
        finally:
            os._exit(TIMEOUT)


def _running_with_deadlines(durations: Callable[[], Mapping[str, float]]) -> Callable:
    def run_tests(self, *, mutant_name: str | None, tests) -> int:
        from mutmut.utils.file_utils import change_cwd

        with change_cwd("mutants"):
            return int(self.execute_pytest(self._pytest_args_regular_run(tests), plugins=[TestDeadline(durations())]))

    return run_tests


def _skipping_named_equivalents(collect: Callable, root: Path) -> Callable:
    def collect_after_skipping(*args, **kwargs):
        from retry import skip_named_equivalents

        print(f"mutation: {skip_named_equivalents(root)} mutant(s) named as equivalent are skipped", flush=True)
        return collect(*args, **kwargs)

    return collect_after_skipping


def main() -> int:
    import mutmut.__main__ as mutmut_main
    from mutmut.runners import harness
    from mutmut.state import state
    from mutmut.workers import isolation

    for runner in (isolation.ForkServerRunner, isolation.ForkRunner):
        runner.submit = _submitting_fastest_first(runner.submit, lambda: state().duration_by_test)
    harness.PytestRunner.run_tests = _running_with_deadlines(lambda: state().duration_by_test)
    mutmut_main.collect_source_file_mutation_data = _skipping_named_equivalents(
        mutmut_main.collect_source_file_mutation_data, Path("."))
    return mutmut_main.cli()


if __name__ == "__main__":
    sys.exit(main())
