"""What a gate's run must give back, checked after every run: a :class:`GateOutput` whose checks are the
declared ones, each reported once with a real boolean, and metrics a JSON report can hold.

A gate that breaks this cannot be trusted to be GREEN: a check it forgot to report would otherwise count as
passed. Built-in gates and plugins are held to it alike.
"""

from __future__ import annotations

import math
from typing import Any

from nxgates.gatekit import GateDef, GateOutput

CONTRACT_CHECK = "contract"  #: the failing check a run that broke its check contract gets
_JSON_SCALARS = (str, int, float, bool, type(None))


def wrong_output(output: Any) -> str | None:
    """Why ``output`` is not what ``run`` must return, or None."""
    if isinstance(output, GateOutput):
        return None
    return f"run() returned {type(output).__name__}, not a nxgates.gatekit.GateOutput"


def broken_checks(gate: GateDef, output: GateOutput) -> str | None:
    """Why the reported checks are not the declared ones, each once with a real boolean; None when they are.

    Every declared check must be reported but those the gate declares optional (``GateDef.optional_checks``:
    recorded only when an option asks, as parallel-grad's T4 with ``--compare-grads``).
    """
    declared = tuple(gate.checks)
    reported = [c.name for c in output.checks]
    problems = []
    for name, given in output.non_boolean_checks.items():
        problems.append(f"check {name!r} was given a {given}, not a boolean")
    for name in dict.fromkeys(reported):
        if name not in declared:
            problems.append(f"check {name!r} is not declared")
        elif reported.count(name) > 1:
            problems.append(f"check {name!r} was reported {reported.count(name)} times")
    missing = [name for name in declared if name not in reported and name not in gate.optional_checks]
    if missing:
        problems.append("declared check" + ("s " if len(missing) > 1 else " ")
                        + ", ".join(map(repr, missing)) + " not reported")
    return "; ".join(problems) or None


def not_json(value: Any, where: str = "metrics") -> str | None:
    """Where ``value`` holds something a JSON report cannot (a numpy scalar, an object), or None.

    NaN and infinities are allowed: the JSON report writes them as null.
    """
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where} has a key {key!r} that is not a string"
            problem = not_json(item, f"{where}[{key!r}]")
            if problem:
                return problem
        return None
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            problem = not_json(item, f"{where}[{i}]")
            if problem:
                return problem
        return None
    if type(value) in _JSON_SCALARS:
        return None
    return f"{where} is a {type(value).__module__}.{type(value).__name__}, not a JSON value (int, float, str, bool)"


def finite_or_null(value: Any) -> Any:
    """``value`` with every NaN and infinity made None, so the report is strict JSON (RFC 8259 has neither)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_null(v) for v in value]
    return value
