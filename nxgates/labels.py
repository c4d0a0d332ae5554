"""How a gate run is named in lines, e.g. ``lora[T=3 DM=6 R=2]``: a leaf, so the runner, the baselines and
the reports name runs alike without importing one another.

A run's name leaves out the parameters that choose only *how* the figures are computed
(:data:`EXECUTION_PARAMS`): a gate's numbers must not depend on its executor or worker count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: parameters that choose how a gate computes, never what: left out of the key
EXECUTION_PARAMS = frozenset({"executor", "workers"})


def keyed_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters that decide the figures: all but :data:`EXECUTION_PARAMS`."""
    return {k: v for k, v in params.items() if k not in EXECUTION_PARAMS}


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
