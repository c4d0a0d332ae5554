"""What ``nxgates run --baseline FILE`` and ``--update-baseline FILE`` do around the gates they run.

``--baseline`` appends a ``baseline`` check to each gate's report, so the console, JSON and JUnit show it
like any other check: PASS when every pinned figure is as in the file, FAIL with one line per figure that
moved (plus how the environment differs from the one the entry was written in). A gate the file lacks, or
one that pins no figure, is named, and ``--baseline-missing`` decides: ``fail`` (the default: a CI job must
not pass because nothing was compared, e.g. after a parameter changed and the file was not regenerated) or
``warn`` (the check passes and says so: for adopting baselines gate by gate).

``--update-baseline`` writes the entries of the gates that passed and pin figures. A run with a planted
fault never touches a baseline: ``--update-baseline`` is refused with it, ``--baseline`` is ignored.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from nxgates.baseline import store
from nxgates.baseline.compare import figure_lines
from nxgates.baseline.keys import INPUTS_METRIC, entry_key, keyed_params
from nxgates.errors import ConfigError
from nxgates.runner import GateReport
from nxgates.streams import shown

#: the metric a gate that checks a user's function names it by (its --target SPEC)
TARGET_METRIC = "target"
CHECK = "baseline"  #: the check ``--baseline`` adds to every gate that ran
MISSING_POLICIES = ("fail", "warn")
COMPARE_FLAG = "--baseline"
UPDATE_FLAG = "--update-baseline"


class BaselineOptions(NamedTuple):
    """The run's baseline options as given."""

    compare: str | None = None  #: --baseline FILE
    update: str | None = None  #: --update-baseline FILE
    missing: str = "fail"  #: --baseline-missing


def prepare(options: BaselineOptions, fault: str | None) -> dict[str, Any] | None:
    """Before any gate runs: refuse what cannot work (exit 2, one line); the document to compare with, if any."""
    if options.update is not None and fault is not None:
        raise ConfigError(f"{UPDATE_FLAG}: a run with --inject never updates a baseline")
    if options.update is not None:
        store.check_updatable(options.update, UPDATE_FLAG)
    if options.compare is None or fault is not None:
        return None
    return store.load(options.compare, COMPARE_FLAG)


def key_of(report: GateReport) -> str:
    """The entry a run matches: its gate, keyed parameters, inputs and, for a gate that checks a user's
    function (invariance), that function's SPEC, so two targets never share an entry."""
    key = entry_key(report.name, report.params, report.output.metrics.get(INPUTS_METRIC))
    target = report.output.metrics.get(TARGET_METRIC)
    return key if target is None else f"{key} target={target}"


def environment_of(report: GateReport) -> dict[str, Any]:
    """The machine's environment and this gate run's executor and workers."""
    from nxgates import environment

    return {**environment.machine(), **environment.execution(report.params, report.output.metrics)}


def entry_of(report: GateReport) -> dict[str, Any]:
    """A gate run as a baseline entry: what it is keyed by, its figures, and where they came from."""
    return {
        "gate": report.name,
        "params": keyed_params(report.params),
        "label": report.label,
        "inputs": report.output.metrics.get(INPUTS_METRIC),
        "fingerprints": report.output.fingerprints,
        "environment": environment_of(report),
    }


def add_check(report: GateReport, doc: dict[str, Any], path: str, missing: str) -> None:
    """Append the ``baseline`` check to a gate's report (not to one that timed out or crashed)."""
    if report.error is not None:
        return
    figures = report.output.fingerprints
    entry = doc["entries"].get(key_of(report))
    path = shown(path)  # the user's file name, inside a detail printed line by line
    if not figures or not isinstance(entry, dict):
        what = (f"no fingerprint: {report.name} pins no figure to compare" if not figures
                else f"{path} has no entry for {report.label} (add it with {UPDATE_FLAG})")
        warn = missing == "warn"
        report.output.check(CHECK, warn, what + (" (--baseline-missing warn)" if warn else ""), seconds=0.0)
        return
    lines = list(figure_lines(report.label, entry.get("fingerprints", {}), figures))
    if not lines:
        report.output.check(CHECK, True, f"{len(figures)} figures as in {path}", seconds=0.0)
        return
    env_lines = list(_environment_lines(entry.get("environment", {}), environment_of(report)))
    detail = "\n".join([f"{len(lines)} of {len(figures)} figures moved since {path}:", *lines, *env_lines])
    report.output.check(CHECK, False, detail, seconds=0.0)


def _environment_lines(old: dict[str, Any], new: dict[str, Any]) -> Iterator[str]:
    from nxgates.environment import differences

    return differences(old, new) if isinstance(old, dict) else iter(())


def update(path: str, reports: list[GateReport]) -> list[str]:
    """Write the entries of the gates that passed and pin figures; the warnings for those left out."""
    entries: dict[str, dict[str, Any]] = {}
    warnings = []
    for r in reports:
        if not r.passed:
            warnings.append(f"{UPDATE_FLAG}: {r.label} not written: it did not pass")
        elif not r.output.fingerprints:
            warnings.append(f"{UPDATE_FLAG}: {r.label} not written: it pins no figure (no fingerprint)")
        else:
            entries[key_of(r)] = entry_of(r)
    if entries:
        store.update(path, entries, UPDATE_FLAG)
    return warnings
