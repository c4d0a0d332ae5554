"""Which baseline entry a run matches, and how a gate run is named in the lines that say what moved.

The key is the gate's name and its effective parameters, except those that choose only *how* the figures
are computed (:data:`EXECUTION_PARAMS`): a gate's numbers must not depend on its executor or worker count,
so a baseline written on a thread pool pins the run on a process pool too, and the executor and workers
are recorded in the entry's environment instead. A run on user inputs adds their digest to the key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: parameters that choose how a gate computes, never what: left out of the key
EXECUTION_PARAMS = frozenset({"executor", "workers"})

#: the metric a gate run on user inputs reports its inputs' digest as
INPUTS_METRIC = "inputs_sha256"


def keyed_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters that decide the figures: all but :data:`EXECUTION_PARAMS`."""
    return {k: v for k, v in params.items() if k not in EXECUTION_PARAMS}


def entry_key(name: str, params: Mapping[str, Any], inputs: str | None = None) -> str:
    """The baseline file's key for a run: name, keyed params sorted by name, and the inputs' digest."""
    shown = " ".join(f"{k}={v}" for k, v in sorted(keyed_params(params).items()))
    return f"{name}[{shown}]" + (f" inputs={inputs}" if inputs else "")


def label(name: str, params: Mapping[str, Any], shown: Iterable[str] | None = None) -> str:
    """A run's name in lines, e.g. ``lora[T=3 DM=6 R=2]``: the params in ``shown``, else every keyed one
    (a gate with none to show is named alone)."""
    keyed = keyed_params(params)
    names = list(keyed) if shown is None else [k for k in shown if k in keyed]
    return f"{name}[{' '.join(f'{k}={keyed[k]}' for k in names)}]" if names else name


def shown_params(declared: Iterable[str], defaults: Mapping[str, Any], presets: Mapping[str, Mapping[str, Any]],
                 params: Mapping[str, Any]) -> list[str] | None:
    """Which params a label shows: the sizes (the params the gate's presets set), and any other keyed param
    that differs from its default, in declaration order. None (show every keyed param) when the gate has no
    presets to tell its sizes by."""
    sizes = {k for values in presets.values() for k in values}
    if not sizes:
        return None
    return [k for k in declared if k not in EXECUTION_PARAMS and k in params
            and (k in sizes or params[k] != defaults.get(k))]
