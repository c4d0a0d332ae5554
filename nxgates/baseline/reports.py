"""``nxgates diff``'s comparison: two JSON reports, gate by gate, figure by figure, in the lines of
``run --baseline``.

Gates are matched by name, keyed params and inputs (:func:`nxgates.baseline.keys.entry_key`), so reports
of two executors or worker counts compare. A gate that pins figures in both reports is compared by them
(what its author declared must not move) and by whether it passed; otherwise by its metrics, leaving out
those that describe timing or the pool rather than the numbers (:func:`is_execution_metric`).
Environment differences are listed but never make two reports different by themselves.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from nxgates.baseline.cells import kind_of
from nxgates.baseline.compare import figure_lines
from nxgates.baseline.keys import INPUTS_METRIC, entry_key, label
from nxgates.baseline.store import figures_problem, json_document
from nxgates.environment import differences
from nxgates.errors import ConfigError
from nxgates.safeio import read_text

SIZE_LIMIT = 256 << 20  #: a report with every cell of a large lora run as a list stays below this


class ReportDiff(NamedTuple):
    """What differs between two reports: figure lines (these decide), environment lines (these inform)."""

    figures: list[str]
    environment: list[str]
    gates: int  #: gates in both reports
    gates_differing: int


def load_report(path: str) -> dict[str, Any]:
    """A JSON report of ``run`` or ``crosscheck``; one line and exit 2 if it is unreadable or is not one."""
    text = read_text(path, "diff", SIZE_LIMIT)
    doc = json_document(text, f"diff {path}: not an nxgates JSON report")
    gates = doc.get("gates") if isinstance(doc, dict) else None
    if not isinstance(gates, list) or not all(
            isinstance(g, dict) and isinstance(g.get("name"), str) and isinstance(g.get("params"), dict)
            for g in gates):
        raise ConfigError(f"diff {path}: not an nxgates JSON report (no gates with names and params)")
    for g in gates:
        problem = _gate_problem(g)
        if problem:
            raise ConfigError(f"diff {path}: gate {g['name']}: {problem}")
    return doc


def _gate_problem(gate: Mapping[str, Any]) -> str | None:
    """What is wrong with a gate run's fields that the comparison reads, None if nothing."""
    for field, kind in (("metrics", dict), ("label", str)):
        if gate.get(field) is not None and not isinstance(gate[field], kind):
            return f"{field} is {kind_of(gate[field])}, not {'a table' if kind is dict else 'text'}"
    return figures_problem(gate["fingerprints"]) if gate.get("fingerprints") is not None else None


def is_execution_metric(name: str) -> bool:
    """Metrics that describe the run, not the numbers: timings, the pool, its workers and tasks."""
    return (name.endswith("seconds") or "worker" in name or name.startswith("tasks_")
            or name in ("executor", "scheduler", "chunk_examples"))


def figures_of(gate: Mapping[str, Any], pinned: bool) -> dict[str, Any]:
    """What is compared of a gate: ``passed`` and its fingerprints, or (not ``pinned``) its metrics."""
    if pinned:
        return {"passed": gate.get("passed"), **gate["fingerprints"]}
    return {"passed": gate.get("passed"), **dict(_flat(gate.get("metrics") or {}))}


def _flat(metrics: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for name, value in metrics.items():
        if is_execution_metric(name):
            continue
        if isinstance(value, dict):
            yield from _flat(value, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", value


def key_of(gate: Mapping[str, Any]) -> str:
    return entry_key(gate["name"], gate["params"], (gate.get("metrics") or {}).get(INPUTS_METRIC))


def diff_reports(a: Mapping[str, Any], b: Mapping[str, Any], a_name: str, b_name: str) -> ReportDiff:
    """Compare two loaded reports; exit 2 (one line) when they have no gate in common."""
    gates_a = {key_of(g): g for g in a["gates"]}
    gates_b = {key_of(g): g for g in b["gates"]}
    common = [k for k in gates_a if k in gates_b]
    if not common:
        raise ConfigError(f"diff: {a_name} and {b_name} have no gate run in common (same gate and params)")
    env_a, env_b = a.get("environment"), b.get("environment")
    env = list(differences(env_a, env_b)) if isinstance(env_a, dict) and isinstance(env_b, dict) else []
    figures: list[str] = []
    differing = 0
    for key in [*gates_a, *(k for k in gates_b if k not in gates_a)]:
        ga, gb = gates_a.get(key), gates_b.get(key)
        name = _label(ga or gb)
        if ga is None or gb is None:
            figures.append(f"{name}: only in {a_name if gb is None else b_name}")
            differing += 1
            continue
        pinned = bool(ga.get("fingerprints")) and bool(gb.get("fingerprints"))
        lines = list(figure_lines(name, figures_of(ga, pinned), figures_of(gb, pinned)))
        figures += lines
        differing += bool(lines)
        env += [f"environment {name} {line.removeprefix('environment ')}"
                for line in differences(_execution(ga), _execution(gb))]
    return ReportDiff(figures, env, len(common), differing)


def _label(gate: Mapping[str, Any]) -> str:
    return gate.get("label") or label(gate["name"], gate["params"])


def _execution(gate: Mapping[str, Any]) -> dict[str, Any]:
    from nxgates.environment import execution

    return execution(gate["params"], gate.get("metrics") or {})
