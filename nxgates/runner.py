"""Runs a gate, once or ``--repeat`` times, and turns each run into a :class:`GateReport`: passed, failed,
timed out, broke its contract (:mod:`nxgates.contract`) or crashed."""

from __future__ import annotations

import errno
import time
from dataclasses import dataclass
from typing import Any

from nxgates import contract
from nxgates.errors import (
    EXIT_FAIL,
    EXIT_INTERNAL,
    EXIT_PASS,
    EXIT_USAGE,
    GateError,
    GateTimeout,
    NxError,
    ResourceError,
    refused_a_resource,
)
from nxgates.gatekit import GateOutput, ParamValue, Progress, RunContext
from nxgates.labels import label, shown_params
from nxgates.registry import GateEntry

#: the error kind of a planted run whose fault moved no pinned figure: a usage error (exit 2), never green
INERT = "inert"
#: the error kind of a run the selftest could not make: the gate refused its parameters once running (exit 2)
REFUSED = "refused"


@dataclass(eq=False)  # records, never compared by value; a generated __eq__ only costs start-up
class GateReport:
    """One gate run as the reports see it. ``error`` is set when the gate timed out or crashed."""

    name: str
    params: dict[str, ParamValue]
    output: GateOutput
    seconds: float
    fault: str | None = None
    error: str | None = None  #: one line: "timed out after 5.0 s", "gate error: ..." or "internal error: ..."
    #: "timeout", "gate" (the gate broke its contract: sys.exit, a wrong result; exit 1), "crash" (exit 3) or
    #: "inert" (a planted fault that changed nothing the gate pins: exit 2, see :mod:`nxgates.plan`)
    error_kind: str | None = None
    traceback: str | None = None
    #: how lines name this run, e.g. ``lora[T=3 DM=6 R=2]`` (:func:`nxgates.labels.label`)
    label: str = ""

    def __post_init__(self) -> None:
        if not self.label:
            self.label = label(self.name, self.params)

    @property
    def passed(self) -> bool:
        checks = self.output.checks
        return self.error is None and bool(checks) and all(c.passed for c in checks)

    @property
    def verdict(self) -> str:
        if self.error_kind == "timeout":
            return f"{self.name}: RED -- {self.error}"
        if self.error_kind in ("crash", "gate"):
            return f"{self.name}: ERROR -- {self.error}"
        if self.error_kind == INERT:
            return f"{self.name}: NO PROOF -- {self.error}"
        if self.error_kind == REFUSED:
            return f"{self.name}: REFUSED -- {self.error}"
        return self.output.green if self.passed else self.output.red


def run_gate(
    entry: GateEntry,
    params: dict[str, ParamValue],
    *,
    fault: str | None = None,
    options: dict[str, Any] | None = None,
    timeout: float | None = None,
    progress: Progress | None = None,
    deadline: float | None = None,
) -> GateReport:
    """Run one gate. Usage errors (NxError) propagate; timeouts and bugs are recorded in the report.

    ``deadline`` (a :func:`time.monotonic` instant) lets several runs share one ``timeout``.
    """
    report = _run_gate(entry, params, fault, options, timeout, progress, deadline)
    report.label = label(entry.name, params, shown_params(entry.gate.params, entry.defaults, entry.presets, params))
    return report


def _run_gate(entry: GateEntry, params: dict[str, ParamValue], fault: str | None, options: dict[str, Any] | None,
              timeout: float | None, progress: Progress | None, deadline: float | None) -> GateReport:
    if deadline is None and timeout is not None:
        deadline = time.monotonic() + timeout
    ctx = RunContext(
        params=dict(params),
        fault=fault,
        options=dict(options or {}),
        deadline=deadline,
        progress=progress or Progress(),
    )
    start = time.perf_counter()
    try:
        output = _call_run(entry, ctx)
    except NxError:
        raise
    except MemoryError:  # the estimate-before-allocate missed a limit (ulimit -v, a cgroup): sizes, not a bug
        raise ResourceError(f"{entry.name} ran out of memory at {_sizes(params)}; use smaller sizes") from None
    except GateTimeout:
        seconds = time.perf_counter() - start
        return _failed(entry, params, fault, seconds, f"timed out after {timeout:g} s", "timeout")
    except GateError as exc:  # what the gate checks broke its contract: the gate's error, not nxgates'
        seconds = time.perf_counter() - start
        return _failed(entry, params, fault, seconds, f"gate error: {exc}", "gate")
    except SystemExit as exc:  # a gate never ends the runner: it is that gate's error, and the next one runs
        seconds = time.perf_counter() - start
        return _failed(entry, params, fault, seconds, f"gate error: run() called sys.exit({exc.code!r})", "gate")
    except Exception as exc:  # a bug in a gate: report it, keep the other gates running
        if isinstance(exc, OSError) and exc.errno in _LIMIT_ERRNOS:  # ... unless it is this machine's limits
            raise ResourceError(f"{entry.name}: the system refused a resource: {exc.strerror} (limits: ulimit -n "
                                "open files, ulimit -u processes); use fewer workers or executor=thread") from None
        if refused_a_resource(exc):  # no new thread: each reserves its stack, which a tight ulimit -v refuses
            raise ResourceError(f"{entry.name}: the system refused a new thread ({exc}; limits: ulimit -v address "
                                "space, ulimit -u processes); raise the limit or use fewer workers") from None
        seconds = time.perf_counter() - start
        report = _failed(entry, params, fault, seconds, f"internal error: {type(exc).__name__}: {exc}", "crash")
        import traceback

        report.traceback = traceback.format_exc()
        return report
    finally:
        ctx.progress.stop()
    seconds = time.perf_counter() - start
    if ctx.deadline is not None and time.monotonic() > ctx.deadline:
        return _failed(entry, params, fault, seconds, f"timed out after {timeout:g} s", "timeout")
    problem = contract.wrong_output(output) or contract.not_json(output.metrics)
    if problem:
        return _failed(entry, params, fault, seconds, f"gate error: {problem}", "gate")
    broken = contract.broken_checks(entry.gate, output)
    if broken:
        output.check(contract.CONTRACT_CHECK, False, broken)
    given = ctx.options.get("inputs")
    if given is not None:  # a run on the user's tensors: key its figures by them
        from nxgates.tensors.read import arrays_digest

        output.metrics["inputs_sha256"] = arrays_digest(given)
    return GateReport(entry.name, dict(params), output, seconds, fault)


def _call_run(entry: GateEntry, ctx: RunContext) -> Any:
    """The gate's ``run(ctx)``: in this thread for a built-in gate (it checks the time itself), in a worker
    thread for a plugin, so the deadline holds whether or not it ever calls ``ctx.check_time()``."""
    if entry.plugin_module is None:
        return entry.gate.run(ctx)
    from nxgates.deadline import call_with_deadline

    return call_with_deadline(entry.name, lambda: entry.gate.run(ctx), ctx.deadline)


#: errnos that mean "this machine's limits", not a bug: open files, processes (fork), kernel memory, /dev/shm
_LIMIT_ERRNOS = (errno.EMFILE, errno.ENFILE, errno.EAGAIN, errno.ENOMEM, errno.ENOSPC)


def _sizes(params: dict[str, ParamValue]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items() if isinstance(v, int))


def _failed(entry: GateEntry, params: dict[str, ParamValue], fault: str | None, seconds: float, error: str,
            kind: str) -> GateReport:
    """A gate that did not finish: one failed check named after what happened (timeout or crash)."""
    out = GateOutput()
    out.check(kind, False, error)
    return GateReport(entry.name, dict(params), out, seconds, fault, error, kind)


def exit_code(reports: list[GateReport]) -> int:
    """pytest's convention: 0 all passed, 1 a check failed or timed out, 3 a gate crashed (a bug); and 2 when a
    planted fault changed nothing, so the run could prove nothing."""
    if any(r.error_kind == "crash" for r in reports):
        return EXIT_INTERNAL
    if any(r.error_kind in (INERT, REFUSED) for r in reports):
        return EXIT_USAGE
    return EXIT_PASS if reports and all(r.passed for r in reports) else EXIT_FAIL


def run_repeated(entry: GateEntry, params: dict[str, ParamValue], repeat: int, **kwargs: Any) -> GateReport:
    """Run a gate ``repeat`` times; the runs must agree on every check and on the numbers' digest.

    One deadline covers all the runs: ``--timeout`` bounds the gate, however large ``--repeat`` is.
    """
    timeout = kwargs.get("timeout")
    if timeout is not None and "deadline" not in kwargs:
        kwargs["deadline"] = time.monotonic() + timeout
    first = run_gate(entry, params, **kwargs)
    if repeat <= 1 or first.error:
        return first
    try:
        signature = _signature(first)
        agreed = 1
        for _ in range(repeat - 1):
            again = run_gate(entry, params, **kwargs)
            if again.error:
                again.seconds += first.seconds  # the time of every run so far, as the deadline counted it
                return again
            agreed += _signature(again) == signature
            first.seconds += again.seconds
    except BadDigest as exc:  # the gate's digest function: its bug, named as the gate's
        report = _failed(entry, params, first.fault, first.seconds, f"gate error: {exc}", "gate")
        report.label = first.label
        return report
    first.output.check(
        f"repeat: {repeat} runs agree",
        agreed == repeat,
        f"{agreed}/{repeat} runs agreed on every check and the digest {first.output.digest[:16]}",
    )
    return first


class BadDigest(Exception):
    """A gate's ``digest`` raised or is not a str: the gate's error, not the runner's."""


def _signature(report: GateReport) -> tuple:
    """What ``--repeat`` runs must agree on: every check's verdict and the digest."""
    try:
        digest = report.output.digest
    except Exception as exc:  # a gate's lazy digest function runs here, at the first read
        raise BadDigest(f"its digest raised {type(exc).__name__}: {' '.join(str(exc).split())}") from None
    if not isinstance(digest, str):
        raise BadDigest(f"its digest is a {type(digest).__name__}, not a str")
    return tuple((c.name, c.passed) for c in report.output.checks), digest
