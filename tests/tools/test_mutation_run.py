"""tools/mutation/run.py: each mutant's tests are handed to mutmut quickest first, none lost or added."""

import importlib.util
import json
import os
from pathlib import Path

import pytest

RUN = Path(__file__).parents[2] / "tools" / "mutation" / "run.py"


@pytest.fixture(scope="module")
def run():
    spec = importlib.util.spec_from_file_location("mutation_run", RUN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tests_are_ordered_by_measured_duration_and_unmeasured_ones_go_last(run):
    durations = {"t_slow": 9.0, "t_fast": 0.001, "t_mid": 0.5}
    assert run.fastest_first(["t_slow", "t_new", "t_mid", "t_fast"], durations) == \
        ["t_fast", "t_mid", "t_slow", "t_new"]


def test_equal_durations_are_ordered_by_name_so_a_run_is_repeatable(run):
    assert run.fastest_first(["b", "a", "c"], {"a": 1.0, "b": 1.0, "c": 1.0}) == ["a", "b", "c"]


def test_the_wrapped_submit_passes_every_argument_and_only_reorders_the_tests(run):
    seen = []

    class Runner:
        def submit(self, mutant_name, tests, cpu_time_limit, estimated_time):
            seen.append((mutant_name, tests, cpu_time_limit, estimated_time))

    Runner.submit = run._submitting_fastest_first(Runner.submit, lambda: {"slow": 2.0, "fast": 0.1})
    Runner().submit("m__mutmut_1", {"slow", "fast"}, 30, 2.1)
    assert seen == [("m__mutmut_1", ["fast", "slow"], 30, 2.1)]


def test_a_test_gets_ten_times_its_duration_and_never_under_the_floor(run):
    assert run.deadline_s("t", {"t": 2.0}) == run.DEADLINE_FLOOR_S + 20.0
    assert run.deadline_s("unmeasured", {}) == run.DEADLINE_FLOOR_S


HANGS = """
import threading

def test_quick():
    assert True

def test_hangs():
    threading.Event().wait()
"""


def _pytest_under_deadlines(run, test_file: Path, floor_s: float) -> int:
    """Run one test file in a forked child under the plugin, as mutmut runs a mutant's tests; its exit status."""
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            run.DEADLINE_FLOOR_S = floor_s
            code = int(pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", str(test_file.parent),
                                    str(test_file)], plugins=[run.TestDeadline({}, test_file.parent / "timeouts")]))
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_a_hung_test_ends_the_run_as_a_timeout(run, tmp_path):
    (tmp_path / "test_hang.py").write_text(HANGS)
    assert _pytest_under_deadlines(run, tmp_path / "test_hang.py", floor_s=0.5) == run.TIMEOUT
    report = (tmp_path / "timeouts" / "no-mutant.txt").read_text()
    assert report.startswith("test_hang.py::test_hangs passed its deadline")
    assert "in test_hangs" in report  # the hung thread's stack


def test_a_run_that_finishes_in_time_keeps_pytests_own_status(run, tmp_path):
    (tmp_path / "test_ok.py").write_text("def test_quick():\n    assert True\n")
    assert _pytest_under_deadlines(run, tmp_path / "test_ok.py", floor_s=0.5) == 0
    (tmp_path / "test_fails.py").write_text("def test_fails():\n    assert False\n")
    assert _pytest_under_deadlines(run, tmp_path / "test_fails.py", floor_s=0.5) == 1


def test_named_equivalents_are_skipped_before_mutmut_reads_what_to_run(run, tmp_path, monkeypatch):
    """A first run has no earlier results for retry.py to mark; the skip must happen inside the run."""
    from tests.tools.test_mutation_retry import SKIPPED_BY_RETRY, project

    m = project(tmp_path, {"pkg.m.x_f__mutmut_1": None, "pkg.m.x_f__mutmut_2": None})
    monkeypatch.syspath_prepend(str(RUN.parent))
    seen = []

    def collect(*args, **kwargs):
        seen.append((args, kwargs, json.loads(m.read_text())["exit_code_by_key"]))
        return "collected"

    assert run._skipping_named_equivalents(collect, tmp_path)("a", mutant_names=()) == "collected"
    assert seen == [(("a",), {"mutant_names": ()},
                     {"pkg.m.x_f__mutmut_1": SKIPPED_BY_RETRY, "pkg.m.x_f__mutmut_2": None})]
