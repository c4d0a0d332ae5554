"""Which baseline entry a run matches, and how a gate run is named in the lines that say what moved.

The key is the gate's name and its effective parameters, except those that choose only *how* the figures
are computed (:data:`EXECUTION_PARAMS`): a gate's numbers must not depend on its executor or worker count,
so a baseline written on a thread pool pins the run on a process pool too, and the executor and workers
are recorded in the entry's environment instead. A run on user inputs adds their digest to the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nxgates.labels import EXECUTION_PARAMS, keyed_params, label, shown_params  # noqa: F401  (the key's parts)

#: the metric a gate run on user inputs reports its inputs' digest as
INPUTS_METRIC = "inputs_sha256"


def entry_key(name: str, params: Mapping[str, Any], inputs: str | None = None) -> str:
    """The baseline file's key for a run: name, keyed params sorted by name, and the inputs' digest."""
    shown = " ".join(f"{k}={v}" for k, v in sorted(keyed_params(params).items()))
    return f"{name}[{shown}]" + (f" inputs={inputs}" if inputs else "")
