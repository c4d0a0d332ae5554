"""The runner: --repeat's agreement, and one deadline per gate whatever --repeat says."""

import time

from nxgates.gatekit import GateDef, GateOutput
from nxgates.registry import GateEntry
from nxgates.runner import run_repeated


def entry_running(run) -> GateEntry:
    return GateEntry.of("fake", GateDef(params={}, checks=("ok",), run=run), {})


def passing(ctx) -> GateOutput:
    out = GateOutput()
    out.check("ok", True)
    out.digest = "same"
    return out


def digested_lazily(digests):
    """A gate whose every run gives its digest as a function (as lora does), the next of ``digests``."""
    values = iter(digests)

    def run(ctx) -> GateOutput:
        out = GateOutput()
        out.check("ok", True)
        value = next(values)
        out.digest = lambda: value
        return out

    return run


def test_repeat_compares_digests_given_as_functions():
    assert run_repeated(entry_running(digested_lazily(["same"] * 3)), {}, 3, timeout=None).passed
    report = run_repeated(entry_running(digested_lazily(["one", "one", "other"])), {}, 3, timeout=None)
    assert not report.passed
    assert report.output.checks[-1].detail == "2/3 runs agreed on every check and the digest one"


def test_every_repeat_shares_the_gates_deadline():
    deadlines = []

    def run(ctx):
        deadlines.append(ctx.deadline)
        return passing(ctx)

    report = run_repeated(entry_running(run), {}, 5, timeout=100.0)
    assert report.passed and len(deadlines) == 5
    assert len(set(deadlines)) == 1  # not a fresh deadline per run


def test_many_repeats_time_out_instead_of_running_on():
    runs = []

    def run(ctx):
        runs.append(1)
        time.sleep(0.02)
        ctx.check_time()
        return passing(ctx)

    report = run_repeated(entry_running(run), {}, 10_000, timeout=0.2)
    assert report.error_kind == "timeout" and report.error == "timed out after 0.2 s"
    assert len(runs) < 10_000


def test_no_timeout_means_no_deadline():
    deadlines = []

    def run(ctx):
        deadlines.append(ctx.deadline)
        return passing(ctx)

    assert run_repeated(entry_running(run), {}, 2, timeout=None).passed
    assert deadlines == [None, None]


def test_running_out_of_memory_is_a_resource_error_not_a_crash():
    import pytest

    from nxgates.errors import ResourceError

    def run(ctx):
        raise MemoryError()

    with pytest.raises(ResourceError, match="fake ran out of memory"):
        run_repeated(entry_running(run), {"N": 3}, 1, timeout=None)


def test_a_system_limit_is_a_resource_error_and_other_os_errors_are_crashes():
    import errno

    import pytest

    from nxgates.errors import ResourceError

    def out_of_files(ctx):
        raise OSError(errno.EMFILE, "Too many open files")

    def broken(ctx):
        raise OSError(errno.EBADF, "Bad file descriptor")

    with pytest.raises(ResourceError, match="Too many open files"):
        run_repeated(entry_running(out_of_files), {}, 1, timeout=None)
    report = run_repeated(entry_running(broken), {}, 1, timeout=None)
    assert report.error_kind == "crash" and "Bad file descriptor" in report.error


def test_a_thread_the_system_refuses_is_a_resource_error_not_a_crash():
    """Under a tight `ulimit -v` a gate's thread cannot start (each reserves its stack): exit 2 naming the
    limit, as for file descriptors, not exit 3 ("internal error") with a traceback. Other RuntimeErrors are
    still bugs."""
    import pytest

    from nxgates.errors import ResourceError
    from nxgates.runner import run_gate

    def refused(ctx):
        raise RuntimeError("can't start new thread")

    with pytest.raises(ResourceError, match=r"^fake: the system refused a new thread .*ulimit -v"):
        run_gate(entry_running(refused), {})

    def buggy(ctx):
        raise RuntimeError("a bug")

    assert run_gate(entry_running(buggy), {}).error_kind == "crash"


def flaky_entry():
    """A stand-in gate whose numbers change on every run: what --repeat exists to catch."""
    runs = iter(range(100))

    def run(ctx):
        out = GateOutput()
        out.check("always passes", True)
        out.digest = f"run-{next(runs) % 2}"
        return out

    gate = GateDef(params={}, checks=("always passes",), run=run)
    return GateEntry.of("flaky", gate, {})


def test_repeat_fails_when_runs_disagree():
    report = run_repeated(flaky_entry(), {}, 4)
    assert not report.passed
    (check,) = [c for c in report.output.checks if c.name.startswith("repeat")]
    assert not check.passed and check.detail.startswith("2/4 runs agreed")
