"""No proof, no green: a run with a planted fault never exits 0, whatever the sizes or the tolerance. The
cases a hostile user found are pinned here; a property test then tries every fault of every built-in gate
over its sizes, from the smallest up."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nxgates.errors import EXIT_FAIL, EXIT_PASS, EXIT_USAGE, NxError
from nxgates.plan import RunRequest, plan_run
from nxgates.registry import load
from nxgates.runner import exit_code


def exit_of(gate: str, fault: str | None, *sets: str) -> int:
    """What ``nxgates run GATE [--inject FAULT] --set ...`` exits with, in-process."""
    try:
        plan = plan_run(RunRequest((gate,), tuple(sets), fault=fault, timeout=120))
        return exit_code([plan.run(g) for g in plan.gates])
    except NxError:
        return EXIT_USAGE


@pytest.mark.parametrize(("gate", "fault", "sets", "expected"), [
    ("lora", "transposed-b", ("R=1",), EXIT_USAGE),  # a rank-1 dB is its own transpose
    ("lora", "transposed-b", ("R=1", "DM=40", "T=4"), EXIT_USAGE),
    ("lora", "grad-bug", ("tol_permil=150",), EXIT_FAIL),  # a looser tolerance hides it: missed, not green
    ("lora", "missing-rescale", ("tol_permil=1000",), EXIT_FAIL),
    ("ta-gradcheck", "relu-grad", ("tol_permil=1000",), EXIT_FAIL),
    ("dp-train", "completion-order", ("B=4", "D=1", "H=1", "O=1"), EXIT_USAGE),
    ("dp-train", "stale-weights", ("B=2", "D=1", "H=1", "O=1"), None),
    ("dp-train", "relu-grad", ("B=2", "D=1", "H=1", "O=1"), None),
])
def test_the_planted_runs_that_were_green(gate, fault, sets, expected):
    code = exit_of(gate, fault, *sets)
    assert code != EXIT_PASS
    if expected is not None:
        assert code == expected


def test_the_same_sizes_without_the_fault_are_green():
    assert exit_of("lora", None, "R=1") == EXIT_PASS
    assert exit_of("lora", None, "tol_permil=150") == EXIT_PASS


#: each built-in gate's sizes, from the smallest its ranges admit up to a size that runs in milliseconds
SIZES = {
    "lora": {"T": (1, 4), "DM": (1, 8), "R": (1, 4), "tol_permil": (0, 1000)},
    "lora-train": {"T": (1, 3), "DM": (1, 6), "R": (1, 3), "steps": (1, 4), "tol_permil": (0, 1000)},
    "parallel-grad": {"D": (1, 5), "H": (1, 5), "O": (1, 4), "B": (2, 9)},
    "ta-gradcheck": {"D": (1, 4), "H": (1, 4), "O": (1, 3), "B": (1, 3), "tol_permil": (0, 1000)},
    "dp-train": {"D": (1, 3), "H": (1, 3), "O": (1, 3), "B": (2, 6), "steps": (2, 3), "tol_permil": (0, 1000)},
    "invariance": {"D": (1, 4), "H": (1, 4), "O": (1, 3), "B": (2, 9), "rows": (1, 9), "repeat": (2, 3)},
}


@st.composite
def planted_runs(draw):
    registry = load(None)
    gate = draw(st.sampled_from(sorted(SIZES)))
    fault = draw(st.sampled_from(sorted(registry.resolve(gate).gate.faults)))
    sets = [f"{key}={draw(st.integers(low, high))}" for key, (low, high) in SIZES[gate].items()]
    return gate, fault, sets


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(planted_runs())
def test_no_planted_run_exits_0(run):
    gate, fault, sets = run
    assert exit_of(gate, fault, *sets) != EXIT_PASS, f"nxgates run {gate} --inject {fault} --set {' '.join(sets)}"
