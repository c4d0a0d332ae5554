"""``nxgates run GATE --inputs PATH``: a gate's parameters and arrays from the user's tensors.

An ``.npz`` gives the sizes (a ``--set`` that contradicts them is a usage error); a directory of raw dumps
takes its shapes from the parameters. The other parameters come, as always, from the defaults, the preset
and ``--set``.
"""

from __future__ import annotations

import os

import numpy as np

from nxgates.errors import ConfigError
from nxgates.gatekit import INPUT_DTYPES, InputArray, InputSpec, ParamValue
from nxgates.registry import GateEntry
from nxgates.registry.params import parse_sets
from nxgates.tensors.read import check_finite, read_npz, read_raw_dir, sizes_of


def input_spec(entry: GateEntry, flag: str) -> InputSpec:
    """The gate's declared inputs; a gate without them, or with a malformed declaration (a plugin's), is a
    usage error naming the gate."""
    spec = entry.gate.inputs
    if spec is None:
        raise ConfigError(f"{flag}: gate {entry.name!r} declares no input tensors")
    if not isinstance(spec, InputSpec) or not spec.arrays or not all(
            isinstance(a, InputArray) and a.dtype in INPUT_DTYPES for a in spec.arrays):
        raise ConfigError(f"{flag}: gate {entry.name!r}: GateDef.inputs must be an InputSpec of InputArrays "
                          f"with dtypes {', '.join(INPUT_DTYPES)}")
    return spec


def inputs_for_run(entries: list[GateEntry], params: dict[str, dict[str, ParamValue]], sets: tuple[str, ...],
                   path: str) -> tuple[dict[str, dict[str, ParamValue]], dict[str, np.ndarray]]:
    """The run's parameters with the sizes the arrays give, and the arrays (checked, native C order)."""
    if len(entries) != 1:
        raise ConfigError(f"--inputs takes the tensors of one gate, not {len(entries)}")
    entry = entries[0]
    spec = input_spec(entry, "--inputs")
    where = f"--inputs {path}"
    p = dict(params[entry.name])
    if os.path.isdir(path):
        arrays = read_raw_dir(path, spec, p)
    else:
        arrays, _meta = read_npz(path, spec)
        given = {key for gate, key, _raw in parse_sets(sets) if gate in (None, entry.name, *entry.aliases)}
        for key, (value, array) in sizes_of(where, spec, arrays).items():
            if key in given and p[key] != value:
                raise ConfigError(f"--set {key}={p[key]} contradicts {where}: array {array} gives {key}={value}")
            try:
                p[key] = entry.gate.params[key].check(key, value)
            except ConfigError as exc:
                raise ConfigError(f"{where}: array {array}: {exc}") from None
        try:
            entry.gate.validate(p)
        except ConfigError as exc:
            raise ConfigError(f"{entry.name}: {where}: {exc}") from None
    check_finite(where, spec, arrays)
    try:
        spec.admit(arrays, p)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return {**params, entry.name: p}, arrays
