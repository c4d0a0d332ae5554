"""The runner's edges, in-process: the report of each way a run ends (passed, failed, timed out, broke its
contract, crashed), the resource refusals that are exit 2, exit codes, labels, and --repeat's bookkeeping."""

from __future__ import annotations

import errno
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from nxgates import runner
from nxgates.deadline import THREAD_PREFIX, abandoned_threads
from nxgates.errors import ConfigError, GateTimeout, ResourceError
from nxgates.gatekit import GateDef, GateOutput, IntParam, Progress
from nxgates.registry import GateEntry
from nxgates.runner import BadDigest, GateReport, exit_code, run_gate, run_repeated
from nxgates.tensors.read import arrays_digest


def entry_of(run, checks=("ok",), name="fake", params=None, presets=None, defaults=None, plugin=None,
             optional=()) -> GateEntry:
    gate = GateDef(params=params or {}, checks=checks, run=run, optional_checks=optional)
    if presets is None and plugin is None:
        return GateEntry.of(name, gate, defaults or {})
    return GateEntry(name, name, name, (), plugin_module=plugin, _gate=gate, _defaults=dict(defaults or {}),
                     _presets=presets or {"seed": {}})


def output(passed=True, digest="same", name="ok") -> GateOutput:
    out = GateOutput(green="all green", red="some red")
    out.check(name, passed, "detail")
    out.digest = digest
    return out


def passing(ctx) -> GateOutput:
    return output()


def raising(exc):
    def run(ctx):
        raise exc

    return run


class FakeClock:
    """Stands in for the runner's ``time``: perf_counter advances ``step`` a read, monotonic ``tick`` a read."""

    def __init__(self, step: float = 1.0, now: float = 1000.0, tick: float = 0.0):
        self.t = 0.0
        self.step = step
        self.now = now
        self.tick = tick

    def perf_counter(self) -> float:
        self.t += self.step
        return self.t

    def monotonic(self) -> float:
        now = self.now
        self.now += self.tick
        return now


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(runner, "time", SimpleNamespace(perf_counter=fake.perf_counter, monotonic=fake.monotonic))
    return fake


# ---- GateReport -------------------------------------------------------------------------------------------


def test_a_report_is_labelled_by_its_params_unless_given_a_label():
    assert GateReport("g", {"N": 3, "M": 4}, GateOutput(), 0.0).label == "g[N=3 M=4]"
    assert GateReport("g", {}, GateOutput(), 0.0).label == "g"
    assert GateReport("g", {"N": 3}, GateOutput(), 0.0, label="mine").label == "mine"


def test_a_report_defaults_to_no_fault_no_error_no_traceback():
    r = GateReport("g", {}, GateOutput(), 1.5)
    assert (r.fault, r.error, r.error_kind, r.traceback, r.seconds) == (None, None, None, None, 1.5)


def test_a_report_passes_only_with_checks_all_passed_and_no_error():
    assert GateReport("g", {}, output(True), 0.0).passed
    assert not GateReport("g", {}, output(False), 0.0).passed
    assert not GateReport("g", {}, GateOutput(), 0.0).passed  # no checks at all is not a pass
    assert not GateReport("g", {}, output(True), 0.0, error="late").passed
    mixed = output(True)
    mixed.check("other", False)
    assert not GateReport("g", {}, mixed, 0.0).passed


def test_the_verdict_names_the_gate_for_a_timeout_or_an_error():
    assert GateReport("g", {}, output(), 0.0, error="timed out after 5 s", error_kind="timeout").verdict == (
        "g: RED -- timed out after 5 s")
    assert GateReport("g", {}, output(), 0.0, error="internal error: X", error_kind="crash").verdict == (
        "g: ERROR -- internal error: X")
    assert GateReport("g", {}, output(), 0.0, error="gate error: Y", error_kind="gate").verdict == (
        "g: ERROR -- gate error: Y")
    assert GateReport("g", {}, output(True), 0.0).verdict == "all green"
    assert GateReport("g", {}, output(False), 0.0).verdict == "some red"


# ---- run_gate: what the gate is given ------------------------------------------------------------------------


def test_the_gate_gets_copies_of_params_and_options_and_the_fault():
    seen = {}

    def run(ctx):
        seen.update(params=ctx.params, options=ctx.options, fault=ctx.fault, deadline=ctx.deadline)
        ctx.params["N"] = 99
        ctx.options["extra"] = 1
        return passing(ctx)

    params, options = {"N": 3}, {"save": "x"}
    report = run_gate(entry_of(run), params, fault="bitflip", options=options)
    assert seen == {"params": {"N": 99}, "options": {"save": "x", "extra": 1}, "fault": "bitflip", "deadline": None}
    assert params == {"N": 3} and options == {"save": "x"}
    assert report.params == {"N": 3} and report.fault == "bitflip" and report.name == "fake"
    assert report.passed and report.error is None and report.error_kind is None


def test_without_options_the_gate_gets_an_empty_dict():
    seen = []
    run_gate(entry_of(lambda ctx: seen.append(ctx.options) or passing(ctx)), {})
    assert seen == [{}]


def test_a_timeout_becomes_a_deadline_from_now_and_a_given_deadline_wins(clock):
    seen = []

    def run(ctx):
        seen.append(ctx.deadline)
        return passing(ctx)

    run_gate(entry_of(run), {}, timeout=5.0)
    run_gate(entry_of(run), {}, timeout=5.0, deadline=1003.0)
    run_gate(entry_of(run), {}, deadline=1004.0)
    assert seen == [1005.0, 1003.0, 1004.0]


def test_the_gate_reports_to_the_given_progress_which_is_stopped_even_after_a_crash():
    events = []

    class Recording(Progress):
        def start(self, label, total):
            events.append(("start", label, total))

        def stop(self):
            events.append("stop")

    def run(ctx):
        ctx.progress.start("cells", 4)
        raise ValueError("boom")

    report = run_gate(entry_of(run), {}, progress=Recording())
    assert events == [("start", "cells", 4), "stop"]
    assert report.error_kind == "crash"


def test_a_built_in_gate_runs_in_this_thread_and_a_plugin_in_a_named_worker_thread():
    threads = []

    def run(ctx):
        threads.append((threading.current_thread().name, ctx.params))
        return passing(ctx)

    assert run_gate(entry_of(run), {"N": 1}).passed
    assert run_gate(entry_of(run, plugin="someplugin.gate"), {"N": 2}).passed
    assert threads == [(threading.current_thread().name, {"N": 1}), (f"{THREAD_PREFIX}fake", {"N": 2})]


def test_a_plugin_that_never_checks_the_time_is_abandoned_at_its_deadline():
    """The runner does not wait for a plugin's run past the deadline: the run is left going in its thread."""
    release = threading.Event()

    def run(ctx):
        release.wait(3)
        return passing(ctx)

    try:
        report = run_gate(entry_of(run, plugin="someplugin.gate"), {}, timeout=0.05)
        assert f"{THREAD_PREFIX}fake" in [t.name for t in abandoned_threads()]
    finally:
        release.set()
    assert report.error_kind == "timeout" and report.error == "timed out after 0.05 s"


# ---- run_gate: how a run ends -----------------------------------------------------------------------------


def test_a_passing_run_reports_its_output_and_time(clock):
    out = output()
    report = run_gate(entry_of(lambda ctx: out), {"N": 2}, fault="f")
    assert report.output is out and report.passed
    assert report.seconds == 1.0  # one perf_counter step between start and end
    assert (report.fault, report.params, report.label) == ("f", {"N": 2}, "fake[N=2]")


def test_a_gate_timeout_is_a_failed_timeout_check(clock):
    report = run_gate(entry_of(raising(GateTimeout("timed out"))), {"N": 1}, fault="f", timeout=2.5)
    assert report.error == "timed out after 2.5 s" and report.error_kind == "timeout"
    assert [(c.name, c.passed, c.detail) for c in report.output.checks] == [
        ("timeout", False, "timed out after 2.5 s")]
    assert (report.name, report.fault, report.params, report.seconds) == ("fake", "f", {"N": 1}, 1.0)
    assert report.verdict == "fake: RED -- timed out after 2.5 s" and not report.passed
    assert report.traceback is None


def test_a_run_that_ends_after_its_deadline_is_a_timeout_even_if_it_passed(clock):
    clock.now = 1000.0

    def late(ctx):
        clock.now = 1010.0  # the gate overran without checking the time
        return passing(ctx)

    report = run_gate(entry_of(late), {"N": 1}, fault="f", timeout=3.0)
    assert report.error_kind == "timeout" and report.error == "timed out after 3 s"
    assert [(c.name, c.passed, c.detail) for c in report.output.checks] == [("timeout", False, "timed out after 3 s")]
    assert (report.fault, report.seconds, report.params) == ("f", 1.0, {"N": 1})


def test_a_run_that_ends_on_its_deadline_is_in_time(clock):
    def on_time(ctx):
        clock.now = ctx.deadline
        return passing(ctx)

    assert run_gate(entry_of(on_time), {}, timeout=3.0).passed


def test_sys_exit_in_a_gate_is_that_gates_error_not_the_runners(clock):
    report = run_gate(entry_of(raising(SystemExit(4))), {}, fault="f")
    assert report.error == "gate error: run() called sys.exit(4)" and report.error_kind == "gate"
    assert [(c.name, c.passed, c.detail) for c in report.output.checks] == [
        ("gate", False, "gate error: run() called sys.exit(4)")]
    assert report.fault == "f" and report.seconds == 1.0
    assert run_gate(entry_of(raising(SystemExit("bye"))), {}).error == "gate error: run() called sys.exit('bye')"
    assert exit_code([report]) == 1


def test_a_bug_in_a_gate_is_a_crash_with_its_traceback(clock):
    report = run_gate(entry_of(raising(KeyError("k"))), {"N": 1}, fault="f")
    assert report.error == "internal error: KeyError: 'k'" and report.error_kind == "crash"
    assert [(c.name, c.passed, c.detail) for c in report.output.checks] == [
        ("crash", False, "internal error: KeyError: 'k'")]
    assert report.traceback.startswith("Traceback (most recent call last):")
    assert report.traceback.rstrip().endswith("KeyError: 'k'")
    assert (report.fault, report.seconds, report.params) == ("f", 1.0, {"N": 1})
    assert report.verdict == "fake: ERROR -- internal error: KeyError: 'k'"


def test_a_usage_error_from_a_gate_propagates():
    with pytest.raises(ConfigError, match="^bad size$"):
        run_gate(entry_of(raising(ConfigError("bad size"))), {})


def test_running_out_of_memory_names_the_integer_sizes():
    with pytest.raises(ResourceError) as info:
        run_gate(entry_of(raising(MemoryError())), {"N": 3, "mode": "tree", "M": 40})
    assert str(info.value) == "fake ran out of memory at N=3 M=40; use smaller sizes"
    assert info.value.__cause__ is None and info.value.__suppress_context__


@pytest.mark.parametrize("code", [errno.EMFILE, errno.ENFILE, errno.EAGAIN, errno.ENOMEM, errno.ENOSPC])
def test_each_system_limit_errno_is_a_resource_error(code):
    with pytest.raises(ResourceError) as info:
        run_gate(entry_of(raising(OSError(code, "the strerror"))), {})
    assert str(info.value) == ("fake: the system refused a resource: the strerror (limits: ulimit -n open files, "
                               "ulimit -u processes); use fewer workers or executor=thread")
    assert info.value.__suppress_context__


def test_an_os_error_of_another_errno_is_a_crash():
    report = run_gate(entry_of(raising(OSError(errno.ENOENT, "No such file"))), {})
    assert report.error_kind == "crash" and report.error == "internal error: FileNotFoundError: [Errno 2] No such file"


def test_a_refused_thread_is_a_resource_error_with_the_exact_message():
    with pytest.raises(ResourceError) as info:
        run_gate(entry_of(raising(RuntimeError("can't start new thread"))), {})
    assert str(info.value) == ("fake: the system refused a new thread (can't start new thread; limits: ulimit -v "
                               "address space, ulimit -u processes); raise the limit or use fewer workers")
    assert info.value.__suppress_context__


def test_a_run_that_returns_no_output_broke_its_contract(clock):
    report = run_gate(entry_of(lambda ctx: None), {}, fault="f")
    msg = "gate error: run() returned NoneType, not a nxgates.gatekit.GateOutput"
    assert report.error == msg and report.error_kind == "gate"
    assert [(c.name, c.passed, c.detail) for c in report.output.checks] == [("gate", False, msg)]
    assert report.fault == "f" and report.seconds == 1.0


def test_metrics_a_json_report_cannot_hold_break_the_contract():
    def run(ctx):
        out = output()
        out.metrics["loss"] = np.float32(1.0)
        return out

    report = run_gate(entry_of(run), {})
    assert report.error_kind == "gate"
    assert report.error == ("gate error: metrics['loss'] is a numpy.float32, not a JSON value (int, float, str, "
                            "bool)")


def test_a_check_that_is_not_declared_adds_a_failing_contract_check():
    report = run_gate(entry_of(lambda ctx: output(name="surprise"), checks=("ok",)), {})
    assert report.error is None and not report.passed
    assert [(c.name, c.passed) for c in report.output.checks] == [("surprise", True), ("contract", False)]
    assert report.output.checks[-1].detail == "check 'surprise' is not declared; declared check 'ok' not reported"


def test_the_runners_own_failing_checks_keep_the_contract():
    """The checks the runner adds (a contract breach, a crash) are real booleans, as it demands of a gate."""
    from nxgates import contract
    from nxgates.gatekit import GateDef

    report = run_gate(entry_of(lambda ctx: GateOutput(), checks=("ok",)), {})
    assert [(c.name, c.passed) for c in report.output.checks] == [("contract", False)]
    assert report.output.checks[0].detail == "declared check 'ok' not reported"
    lenient = GateDef(params={}, checks=("ok", "contract"), run=passing, optional_checks=("ok",))
    assert contract.broken_checks(lenient, report.output) is None
    crashed = run_gate(entry_of(raising(ValueError("x"))), {})
    assert contract.broken_checks(GateDef(params={}, checks=("crash",), run=passing), crashed.output) is None


def test_a_run_that_keeps_its_contract_gets_no_contract_check():
    report = run_gate(entry_of(passing), {})
    assert [c.name for c in report.output.checks] == ["ok"]


def test_a_run_on_given_tensors_records_their_digest():
    arrays = {"X": np.arange(4, dtype=np.float32).reshape(2, 2)}
    report = run_gate(entry_of(passing), {}, options={"inputs": arrays})
    assert report.output.metrics["inputs_sha256"] == arrays_digest(arrays)
    assert "inputs_sha256" not in run_gate(entry_of(passing), {}).output.metrics


def test_the_label_shows_the_sizes_and_the_params_that_differ_from_their_defaults():
    params = {"N": IntParam("n"), "M": IntParam("m"), "K": IntParam("k"), "workers": IntParam("w")}
    entry = entry_of(passing, params=params, presets={"seed": {"N": 2}, "big": {"N": 9}},
                     defaults={"N": 2, "M": 5, "K": 1, "workers": 1})
    report = run_gate(entry, {"N": 3, "M": 5, "K": 4, "workers": 8})
    assert report.label == "fake[N=3 K=4]"
    failed = run_gate(entry_of(raising(ValueError()), params=params, presets={"seed": {"N": 2}},
                               defaults={"N": 2, "M": 5, "K": 1, "workers": 1}), {"N": 2, "M": 5, "K": 1, "workers": 2})
    assert failed.label == "fake[N=2]"


# ---- exit codes -------------------------------------------------------------------------------------------


def report_of(passed=True, kind=None) -> GateReport:
    return GateReport("g", {}, output(passed), 0.0, error=None if kind is None else "x", error_kind=kind)


def test_exit_code_is_0_when_all_passed_1_on_a_failure_and_3_on_a_crash():
    assert exit_code([report_of(), report_of()]) == 0
    assert exit_code([report_of(), report_of(False)]) == 1
    assert exit_code([report_of(), report_of(kind="timeout")]) == 1
    assert exit_code([report_of(), report_of(kind="gate")]) == 1
    assert exit_code([report_of(False), report_of(kind="crash")]) == 3
    assert exit_code([report_of(kind="crash"), report_of()]) == 3
    assert exit_code([]) == 1  # nothing ran is not a pass


# ---- run_repeated -----------------------------------------------------------------------------------------


def counting(outputs):
    """A gate returning ``outputs`` one after the other; ``calls`` counts its runs."""
    it = iter(outputs)
    calls = []

    def run(ctx):
        calls.append(ctx.deadline)
        item = next(it)
        if isinstance(item, BaseException):
            raise item
        return item

    return run, calls


def test_one_run_or_fewer_adds_no_repeat_check():
    for repeat in (0, 1):
        run, calls = counting([output()])
        report = run_repeated(entry_of(run), {}, repeat)
        assert len(calls) == 1 and [c.name for c in report.output.checks] == ["ok"]


def test_agreeing_runs_add_a_passing_repeat_check_and_sum_their_times(clock):
    run, calls = counting([output(digest="0123456789abcdef0123") for _ in range(3)])
    report = run_repeated(entry_of(run), {"N": 1}, 3, fault="f")
    assert len(calls) == 3 and report.passed
    last = report.output.checks[-1]
    assert (last.name, last.passed) == ("repeat: 3 runs agree", True)
    assert last.detail == "3/3 runs agreed on every check and the digest 0123456789abcdef"
    assert report.seconds == 3.0 and report.fault == "f" and report.label == "fake[N=1]"


def test_a_run_whose_checks_disagree_fails_the_repeat_check():
    run, _ = counting([output(True), output(False), output(True)])
    report = run_repeated(entry_of(run), {}, 3)
    last = report.output.checks[-1]
    assert not last.passed and last.detail == "2/3 runs agreed on every check and the digest same"


def test_a_first_run_that_failed_is_not_repeated():
    run, calls = counting([SystemExit(1), output()])
    report = run_repeated(entry_of(run), {}, 5)
    assert len(calls) == 1 and report.error_kind == "gate"
    assert [c.name for c in report.output.checks] == ["gate"]


def test_a_later_run_that_failed_is_the_report_with_the_time_of_every_run(clock):
    run, calls = counting([output(), output(), ValueError("late"), output()])
    report = run_repeated(entry_of(run), {}, 4)
    assert len(calls) == 3
    assert report.error == "internal error: ValueError: late" and report.error_kind == "crash"
    assert report.seconds == 3.0  # two runs of 1 s before, and its own


def test_one_deadline_from_the_timeout_covers_every_run(clock):
    clock.tick = 0.5  # time passes: a deadline taken per run would move
    run, calls = counting([output()] * 3)
    run_repeated(entry_of(run), {}, 3, timeout=7.0)
    assert calls == [1007.0] * 3
    run, calls = counting([output()] * 2)
    run_repeated(entry_of(run), {}, 2, timeout=70.0, deadline=1009.0)
    assert calls == [1009.0] * 2
    run, calls = counting([output()] * 2)
    run_repeated(entry_of(run), {}, 2)
    assert calls == [None, None]


def raising_digest(exc):
    def digest():
        raise exc

    return digest


def test_a_digest_that_raises_is_the_gates_error(clock):
    run, _ = counting([output(digest=raising_digest(ValueError("no\n   digest  here"))), output()])
    report = run_repeated(entry_of(run), {"N": 2}, 2, fault="f")
    assert report.error == "gate error: its digest raised ValueError: no digest here"
    assert report.error_kind == "gate" and report.label == "fake[N=2]" and report.fault == "f"
    assert [(c.name, c.passed, c.detail) for c in report.output.checks] == [("gate", False, report.error)]
    assert report.seconds == 1.0


def test_a_digest_that_is_not_a_str_is_the_gates_error():
    run, _ = counting([output(digest=lambda: 42), output()])
    report = run_repeated(entry_of(run), {}, 2)
    assert report.error == "gate error: its digest is a int, not a str" and report.error_kind == "gate"


def test_a_later_runs_bad_digest_is_the_gates_error_too():
    run, _ = counting([output(), output(digest=raising_digest(KeyError("k")))])
    report = run_repeated(entry_of(run), {}, 2)
    assert report.error == "gate error: its digest raised KeyError: 'k'"


def test_the_signature_is_every_checks_verdict_and_the_digest():
    out = output(digest="d")
    out.check("second", False)
    sig = runner._signature(GateReport("g", {}, out, 0.0))
    assert sig == ((("ok", True), ("second", False)), "d")


def test_bad_digest_messages():
    with pytest.raises(BadDigest) as info:
        runner._signature(GateReport("g", {}, output(digest=raising_digest(OSError("a  b"))), 0.0))
    assert str(info.value) == "its digest raised OSError: a b"
    assert info.value.__suppress_context__
    with pytest.raises(BadDigest) as info:
        runner._signature(GateReport("g", {}, output(digest=lambda: None), 0.0))
    assert str(info.value) == "its digest is a NoneType, not a str"


def test_sizes_lists_the_integer_params_in_order():
    assert runner._sizes({"B": 4, "reduction": "tree", "D": 1}) == "B=4 D=1"
    assert runner._sizes({}) == ""
