"""tools/mutation/run.py: each mutant's tests are handed to mutmut quickest first, none lost or added."""

import importlib.util
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
