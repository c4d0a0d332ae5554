"""One run plan for every front door: ``run``, ``selftest``, ``crosscheck`` and the pytest plugin.

A front door turns what its user typed into a :class:`RunRequest` and calls :func:`plan_run`, which checks
everything that can be checked before a gate starts (gate selection, parameters and presets, ``--inputs``,
the fault and whether it can show, the baseline, report paths) and raises a one-line :class:`ConfigError`
(exit 2) for anything wrong. The :class:`RunPlan` it returns then runs each gate the same way for all of
them: the repeat and the deadline, the check contract, the baseline check, and the judgement of a planted
fault (:func:`judge_planted`): a run with a planted fault is never green.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from nxgates.errors import ConfigError, NxError
from nxgates.gatekit import ParamValue, Progress
from nxgates.registry import GateEntry
from nxgates.runner import INERT, REFUSED, GateReport, run_gate, run_repeated
from nxgates.safeio import distinct_files

#: the check a planted run gets when it proved nothing: its fault was missed, or it changed nothing
LIAR_KILL = "liar-kill"
#: ``--ulp``'s upper bound: one binade. Beyond it a comparison could pass a gradient of the wrong sign.
MAX_ULP = 2**23

#: :meth:`RunPlan.run`'s default: plant the plan's own fault (the selftest plants each fault in turn)
PLAN_FAULT = object()

#: the options only some gates take, as (the gate's option name, the flag a user typed)
GATE_OPTIONS = (("save_grads", "--save-grads"), ("compare_grads", "--compare-grads"), ("scheduler", "--scheduler"),
                ("inputs", "--inputs"), ("ulp", "--ulp"), ("target", "--target"))

#: report options that must name a file: their output is not a stream to interleave with the human report
FILE_ONLY_REPORTS = ("--html", "--summary")


@dataclass(frozen=True)
class RunRequest:
    """What a user asked for, in any front door; flags are named as ``nxgates run`` names them."""

    gates: tuple[str, ...]
    sets: tuple[str, ...] = ()
    preset: str | None = None
    config: str | None = None
    fault: str | None = None
    executor: str | None = None
    reduction: str | None = None
    scheduler: str | None = None
    save_grads: str | None = None
    compare_grads: str | None = None
    inputs: str | None = None
    ulp: int | None = None
    target: str | None = None
    baseline: str | None = None
    update_baseline: str | None = None
    baseline_missing: str = "fail"
    timeout: float | None = 600.0
    repeat: int = 1
    reports: dict[str, str | None] = field(default_factory=dict)  #: flag -> path ('-' = stdout) of the run
    annotations: str | None = None  #: --annotations github|none (None: github on GitHub Actions)

    def option_values(self) -> dict[str, Any]:
        return {"save_grads": self.save_grads, "compare_grads": self.compare_grads, "scheduler": self.scheduler,
                "inputs": None, "ulp": self.ulp, "target": self.target}


@dataclass
class PlannedGate:
    """One gate of the plan: its registry entry, effective parameters, and the options it is given."""

    entry: GateEntry
    params: dict[str, ParamValue]
    options: dict[str, Any]

    @property
    def name(self) -> str:
        return self.entry.name


@dataclass
class RunOutcome:
    """The reports of the gates that ran, and what stopped the run early, if anything."""

    done: list[GateReport] = field(default_factory=list)
    interrupted: KeyboardInterrupt | None = None  #: Ctrl-C, or SIGTERM/SIGHUP (Terminated)
    refused: NxError | None = None  #: a gate that could not run (found only once it started)

    @property
    def stopped(self) -> bool:
        return self.interrupted is not None or self.refused is not None


@dataclass
class RunPlan:
    """Everything checked; :meth:`run` runs one planned gate as every front door runs it, :meth:`execute`
    runs them all, and :meth:`write_reports` writes what they gave however the run ended."""

    request: RunRequest
    gates: list[PlannedGate]
    #: the ``--baseline`` document the gates are compared with (None: no comparison)
    baseline_doc: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    #: the GitHub annotations and summary asked for (:func:`nxgates.reporting.github.resolve`), or None
    to_github: Any = None

    @property
    def fault(self) -> str | None:
        return self.request.fault

    def run(self, gate: PlannedGate, *, fault: str | None | object = PLAN_FAULT, extra_params: dict | None = None,
            progress: Progress | None = None) -> GateReport:
        """Run ``gate`` (with the plan's fault, or ``fault`` where the selftest plants its own), judge a planted
        fault, and add the baseline check. Usage errors found while running (NxError) propagate."""
        planted = self.fault if fault is PLAN_FAULT else fault
        assert planted is None or isinstance(planted, str)
        params = {**gate.params, **(extra_params or {})}
        report = run_repeated(gate.entry, params, self.request.repeat, fault=planted, timeout=self.request.timeout,
                              progress=progress, options=gate.options)
        if planted is not None:
            judge_planted(gate.entry, params, gate.options, planted, report, self.request.timeout)
        elif self.baseline_doc is not None:
            from nxgates.baseline import session

            session.add_check(report, self.baseline_doc, str(self.request.baseline), self.request.baseline_missing)
        return report

    def execute(self, on_report: Callable[[GateReport], None],
                progress: Callable[[str], Progress | None] = lambda name: None) -> RunOutcome:
        """Every planned gate in turn. A stop signal, or a gate refused while running, ends the run and is
        recorded in the outcome, so the reports of the gates that finished are still written."""
        outcome = RunOutcome()
        try:
            for gate in self.gates:
                report = self.run(gate, progress=progress(gate.name))  # a bar named after its gate
                outcome.done.append(report)
                on_report(report)
        except KeyboardInterrupt as exc:
            outcome.interrupted = exc
        except NxError as exc:  # e.g. sizes beyond this machine's memory, found only when the gate started
            outcome.refused = exc
        return outcome

    def write_reports(self, outcome: RunOutcome, human_line: Callable[[str], None]) -> list[str]:
        """The JSON, JUnit, GitHub and HTML reports of the gates that ran, and ``--update-baseline`` after a
        run that was not stopped; the warnings to show."""
        from nxgates.reporting import files

        reports, done, stopped = self.request.reports, outcome.done, outcome.stopped
        files.write_reports(done, json_path=reports.get("--json"), junit_path=reports.get("--junit"),
                            interrupted=stopped)
        if self.to_github is not None or reports.get("--html") is not None:  # both from the JSON document
            from nxgates.reporting.json_report import to_json

            doc = to_json(done, stopped)
            if self.to_github is not None:
                from nxgates.reporting import github

                github.publish(self.to_github, doc, human_line)
            if reports.get("--html") is not None:
                from nxgates.reporting.html import html_text

                files.write_text(reports["--html"], html_text(doc), "--html")
        return [] if stopped else self.update_baseline(done)

    def update_baseline(self, done: list[GateReport]) -> list[str]:
        """Write ``--update-baseline``'s entries; the warnings for the gates left out."""
        if self.request.update_baseline is None:
            return []
        from nxgates.baseline import session

        return session.update(self.request.update_baseline, done)


def plan_run(request: RunRequest, *, for_selftest: bool = False) -> RunPlan:
    """Check the request before any gate runs; a one-line ConfigError (exit 2) for anything wrong."""
    from nxgates import registry

    request = _checked_request(request)
    reg = registry.load(request.config)
    entries = reg.select(request.gates)
    sets = _sets_with_shorthands(request, entries)
    params = registry.effective_params(entries, request.preset, sets)
    options = request.option_values()
    if request.inputs is not None:
        params, options["inputs"] = resolve_inputs(entries, params, sets, request.inputs)
    for opt, flag in GATE_OPTIONS:
        if options[opt] is not None and not any(opt in e.gate.options for e in entries):
            raise ConfigError(f"{flag} applies to none of: {', '.join(e.name for e in entries)}")
    if request.fault is not None:
        for e in entries:
            check_fault(e, request.fault, params[e.name])
    _check_paths(request)
    baseline_doc = None
    if not for_selftest and (request.baseline is not None or request.update_baseline is not None):
        from nxgates.baseline import session

        baseline_doc = session.prepare(session.BaselineOptions(request.baseline, request.update_baseline,
                                                         request.baseline_missing), request.fault)
    gates = [PlannedGate(e, params[e.name], {k: v for k, v in options.items() if k in e.gate.options})
             for e in entries]
    return RunPlan(request, gates, baseline_doc, registry.repeated_sets(request.sets), _github_output(request))


def _github_output(request: RunRequest) -> Any:
    """The GitHub annotations and summary to write (checked writable now), or None; its module is imported
    only where it may write."""
    summary = request.reports.get("--summary")
    if request.annotations is None and summary is None and "GITHUB_ACTIONS" not in os.environ:
        return None
    from nxgates.reporting import github

    to_github = github.resolve(request.annotations, summary)
    github.check_writable(to_github)
    return to_github


def check_stdout_reports(reports: dict[str, str | None]) -> None:
    """At most one report on standard output, and only one that is a stream (not --html or --summary)."""
    for flag in FILE_ONLY_REPORTS:
        if reports.get(flag) == "-":
            raise ConfigError(f"{flag} -: this report is written to a file, not to standard output; give a path")
    on_stdout = [flag for flag, path in reports.items() if path == "-"]
    if len(on_stdout) > 1:
        raise ConfigError(f"{' and '.join(f'{flag} -' for flag in on_stdout)} cannot both write to stdout")


def check_fault(entry: GateEntry, fault: str, params: dict[str, ParamValue]) -> None:
    """The gate declares ``fault``, and the gate does not know in advance that it cannot show here."""
    if fault not in entry.gate.faults:
        known = ", ".join(entry.gate.faults) or "none"
        raise ConfigError(f"gate {entry.name!r} has no fault {fault!r} (faults: {known})")
    why = fault_cannot_show(entry, fault, params)
    if why is not None:
        raise ConfigError(f"--inject {fault}: {why}")


def fault_cannot_show(entry: GateEntry, fault: str, params: dict[str, ParamValue]) -> str | None:
    """Why the gate says ``fault`` cannot change anything at ``params``, or None."""
    try:
        return entry.gate.fault_applies(fault, params)
    except ConfigError:
        raise
    except Exception as exc:  # a plugin's predicate that raises: its error, said in one line
        raise ConfigError(f"{entry.name}: fault_applies() raised {type(exc).__name__}: {exc}") from None


def resolve_inputs(entries: list[GateEntry], params: dict[str, dict[str, ParamValue]], sets: tuple[str, ...],
                   path: str) -> tuple[dict[str, dict[str, ParamValue]], Any]:
    """``--inputs PATH``: the parameters the arrays give, and the arrays. A gate that takes any arrays (it
    declares the option but no :class:`InputSpec`, as invariance) gets every array of the ``.npz``."""
    from nxgates.tensors.load import inputs_for_run

    if len(entries) == 1 and entries[0].gate.inputs is None and "inputs" in entries[0].gate.options:
        from nxgates.tensors.read import read_any_npz

        return params, read_any_npz(path)
    return inputs_for_run(entries, params, sets, path)


def _checked_request(request: RunRequest) -> RunRequest:
    if request.scheduler == "":
        raise ConfigError("--scheduler: empty address (give host:port, or leave it out for a LocalCluster)")
    if request.ulp is not None and not 0 <= request.ulp <= MAX_ULP:
        raise ConfigError(f"--ulp {request.ulp}: give 0 (bit-identical) to {MAX_ULP} (2^23, one binade); "
                          "beyond that a gradient of the wrong sign could pass")
    if request.timeout is not None and (math.isnan(request.timeout) or request.timeout <= 0):
        raise ConfigError(f"--timeout {request.timeout}: not a positive number of seconds (inf for no limit)")
    if request.timeout is not None and math.isinf(request.timeout):
        request = replace(request, timeout=None)
    if request.repeat < 1:
        raise ConfigError(f"--repeat {request.repeat}: give 1 or more")
    if request.baseline_missing not in ("fail", "warn"):
        raise ConfigError(f"--baseline-missing {request.baseline_missing!r}: give fail or warn")
    return request


def _sets_with_shorthands(request: RunRequest, entries: list[GateEntry]) -> tuple[str, ...]:
    """``--set`` with ``--executor`` and ``--reduction`` added; a shorthand that contradicts a ``--set`` of the
    same parameter is refused (which one should win is the user's to say, not the order of the flags)."""
    from nxgates.registry.params import parse_sets

    sets = tuple(request.sets)
    for key, value in (("executor", request.executor), ("reduction", request.reduction)):
        if value is None:
            continue
        if not any(key in e.gate.params for e in entries):
            raise ConfigError(f"--{key}: unknown parameter for {', '.join(e.name for e in entries)} "
                              + ("(only gates with a worker pool take it)" if key == "executor"
                                 else "(only the f32 gates take it)"))
        for _gate, set_key, raw in parse_sets(sets):
            if set_key == key and raw.strip() != value:
                raise ConfigError(f"--{key} {value} contradicts --set {key}={raw.strip()}; give one of them")
        sets = (*sets, f"{key}={value}")
    return sets


def _check_paths(request: RunRequest) -> None:
    """Report and data paths: distinct files, writable, one stream on stdout, before anything runs."""
    from nxgates.reporting import files

    reports = request.reports
    check_stdout_reports(reports)
    distinct_files({**reports, "--save-grads": request.save_grads, "--compare-grads": request.compare_grads,
                    "--baseline": request.baseline, "--update-baseline": request.update_baseline,
                    "--inputs": request.inputs})
    for flag in ("--json", "--junit", "--html"):
        files.check_writable(reports.get(flag), flag)
    if reports.get("--html") is not None:
        from nxgates.reporting.html import require_plotting

        require_plotting()
    if request.save_grads is not None:
        from nxgates.safeio import output_path

        output_path(request.save_grads, "--save-grads", stdout_ok=False)


def judge_planted(entry: GateEntry, params: dict[str, ParamValue], options: dict[str, Any], fault: str,
                  report: GateReport, timeout: float | None) -> None:
    """A planted run that every check passed proved nothing: run the same gate without the fault and compare
    the figures it pins, bit for bit. Nothing moved: the fault is *inert* here (exit 2). Something moved: the
    fault was *missed*, and a failed liar-kill check names it and what moved (exit 1)."""
    if report.error is not None or not report.passed:
        return  # caught (or the run broke, which is red already)
    clean = run_gate(entry, params, options=options, timeout=timeout)
    if clean.error is not None:
        report.output.check(LIAR_KILL, False, f"every check passed with --inject {fault}, and the run without it "
                            f"did not finish ({clean.error})", seconds=0.0)
        return
    moved = moved_figures(report, clean)
    if moved:
        shown = ", ".join(moved[:6]) + (f" and {len(moved) - 6} more" if len(moved) > 6 else "")
        report.output.check(LIAR_KILL, False, f"fault {fault} MISSED: it moved {shown}, yet every check passed",
                            seconds=0.0)
        return
    why = f"fault {fault} changes nothing at these parameters (every pinned figure is as without it)"
    report.output.check(LIAR_KILL, False, why, seconds=0.0)
    report.error, report.error_kind = why, INERT


def refused_report(entry: GateEntry, params: dict[str, ParamValue], fault: str | None, why: str,
                   kind: str = INERT) -> GateReport:
    """A run that proved nothing, as a report: a planted fault the gate knows cannot show at ``params`` (never
    started; ``INERT``), or parameters the gate refused once running (``REFUSED``). Exit 2 either way."""
    from nxgates.gatekit import GateOutput

    out = GateOutput()
    out.check(LIAR_KILL if kind == INERT else REFUSED, False, why, seconds=0.0)
    return GateReport(entry.name, dict(params), out, 0.0, fault, why, kind)


def moved_figures(planted: GateReport, clean: GateReport) -> list[str]:
    """The pinned figures that differ between two runs (the digest, for a gate that pins none)."""
    a, b = planted.output.fingerprints, clean.output.fingerprints
    if not a and not b:
        return [] if _digest(planted) == _digest(clean) else ["its digest"]
    return [name for name in dict.fromkeys([*a, *b]) if a.get(name) != b.get(name)]


def _digest(report: GateReport) -> Any:
    try:
        return report.output.digest
    except Exception:  # a plugin's digest function that raises tells nothing apart
        return None
