"""The parallel-grad gate's seed-log declaration: its figures against the gate's own run, and its notes."""

import pytest

from nxgates import crosscheck as xc
from nxgates.errors import ConfigError
from nxgates.gatekit import GateOutput, RunContext
from nxgates.gates.parallel_grad import seedlog
from nxgates.gates.parallel_grad.checks import CHECKS
from tests.oracles.seed_logs import parallel_grad_log

PARAMS = {"D": 8, "H": 16, "O": 4, "B": 8, "workers": 2, "executor": "thread"}
T1, T2, T3 = CHECKS[:3]


def pg_log(workers=2, **kw):
    return parallel_grad_log(**{"workers": workers, "ran": 8, "B": 8, "mism": 0, "chk": 1191, "NP": 192, **kw})


def figures(text, **params):
    ctx = RunContext(params={**PARAMS, **params})
    return [tuple(f) for f in seedlog.figures(xc.parse_log(text, "parallel_grad"), ctx)]


def fake_run(monkeypatch, **metrics):
    """The gate's run replaced by one reporting ``metrics`` (over a seed-sized passing run's) and passing T1-T3."""

    def run(ctx):
        out = GateOutput()
        out.metrics = {"workers": 2, "executor": "thread", "tasks_completed": 8, "bit_mismatches": 0,
                       "nonzero_cells": 1191, "total_cells": 1536, **metrics}
        for name in CHECKS[:3]:
            out.check(name, True)
        return out

    monkeypatch.setattr(seedlog, "run", run)


def test_every_figure_of_a_two_worker_log_by_name():
    """Two workers on the NX machine are enough for T2."""
    assert figures(pg_log(workers=2)) == [
        ("pool tasks completed", 8, 8),
        ("pool tasks B", 8, 8),
        ("bit-mismatches", 0, 0),
        ("non-zero grad cells checked", 1191, 1191),
        ("grad cells total", 1536, 1536),
        (T1, "PASS", "PASS"),
        (T2, "PASS", "PASS"),
        (T3, "PASS", "PASS"),
        ("passed", 3, 3),
        ("checks", 3, 3),
        ("verdict", "GREEN", "GREEN"),
    ]


def test_a_one_worker_nx_machine_fails_t2_and_the_verdict():
    figs = figures(pg_log(workers=1))
    assert [f for f in figs if f[1] != f[2]] == []
    assert (T2, "FAIL", "FAIL") in figs and ("passed", 2, 2) in figs and ("verdict", "RED", "RED") in figs


def test_a_pool_of_one_worker_is_refused():
    with pytest.raises(ConfigError) as info:
        figures(pg_log(), workers=1)
    assert str(info.value) == ("the thread pool has 1 worker: it cannot show parallelism (T2 needs >1 worker); "
                               "crosscheck parallel-grad on a pool of 2 or more")


def test_t1_fails_on_any_bit_mismatch(monkeypatch):
    fake_run(monkeypatch, bit_mismatches=1)
    figs = dict((f[0], f[2]) for f in figures(pg_log()))
    assert figs[T1] == "FAIL" and figs["bit-mismatches"] == 1 and figs["passed"] == 2 and figs["verdict"] == "RED"


@pytest.mark.parametrize("nonzero, t1", [(192, "FAIL"), (193, "PASS")])
def test_t1_needs_more_non_zero_cells_than_one_examples_params(monkeypatch, nonzero, t1):
    fake_run(monkeypatch, nonzero_cells=nonzero)
    assert dict((f[0], f[2]) for f in figures(pg_log()))[T1] == t1


def test_notes_report_the_nx_machines_workers():
    out = GateOutput()
    seedlog.notes(xc.parse_log(pg_log(workers=16), "parallel_grad"), out)
    assert out.metrics == {"log_workers": 16}
    assert [(line.text, line.level) for line in out.lines()] == [
        ("workers=16 (the NX machine's: reported, not compared)", "info")]


def test_the_verdict_word_of_a_log():
    assert seedlog.verdict(xc.parse_log(pg_log(workers=2), "parallel_grad")) == "GREEN"
    assert seedlog.verdict(xc.parse_log(pg_log(workers=1), "parallel_grad")) == "RED"
