"""``nxgates export``: a gate's input arrays in an ``.npz``, with the gate, its parameters and the format
version as JSON in a 0-d unicode member (no pickle anywhere), written atomically."""

from __future__ import annotations

import json
import math
import zipfile
from typing import Any

import numpy as np

from nxgates.core.memory import require
from nxgates.gatekit import INPUT_DTYPES, InputSpec, ParamValue
from nxgates.safeio import output_file
from nxgates.tensors.read import FORMAT_VERSION, META

FLAG = "--out"  #: the option that names the file, in messages


#: bytes per cell while an array is made: the int64 index and the int64 temporaries of its formula, and the
#: result (a generous count: the seed's formulas keep two or three int64 temporaries alive at once)
MAKE_BYTES_PER_CELL = 32


def export_arrays(spec: InputSpec, params: dict[str, ParamValue], what: str = "export") -> dict[str, np.ndarray]:
    """The gate's arrays at ``params``, in their declared dtypes and shapes (a gate that made anything else
    has a bug: refused here rather than written). Sizes beyond the memory budget are refused before anything
    is made (:func:`nxgates.core.memory.require`); ``what`` names the export in that message."""
    shapes = {a.name: a.shape(params) for a in spec.arrays}
    shown = ", ".join(f"{name} {list(shape)}" for name, shape in shapes.items())
    require(MAKE_BYTES_PER_CELL * sum(math.prod(shape) for shape in shapes.values()), f"{what} (arrays {shown})")
    made = spec.make(params)
    arrays = {}
    for a in spec.arrays:
        arr = np.ascontiguousarray(made[a.name])
        want = np.dtype(INPUT_DTYPES[a.dtype])
        if arr.dtype != want or arr.shape != shapes[a.name]:
            raise TypeError(f"input {a.name} made as {arr.dtype} {arr.shape}, declared {want} {shapes[a.name]}")
        arrays[a.name] = arr.astype(want.newbyteorder("<"), copy=False)
    return arrays


def write_npz(path: str, gate: str, params: dict[str, ParamValue], arrays: dict[str, np.ndarray]) -> None:
    """``arrays`` and the metadata into ``path``, under nxgates' one output policy
    (:func:`nxgates.safeio.open_output`): through a temporary file beside it, created so the umask applies,
    keeping an existing file's mode."""
    meta = json.dumps({"format": FORMAT_VERSION, "gate": gate, "params": params}, sort_keys=True)
    members: dict[str, Any] = {**arrays, META: np.array(meta)}
    with output_file(path, FLAG) as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, arr in members.items():  # what np.savez writes, with pickling refused
            with zf.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, arr, allow_pickle=False)
