"""``nxgates export``: a gate's input arrays in an ``.npz``, with the gate, its parameters and the format
version as JSON in a 0-d unicode member (no pickle anywhere), written atomically."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import zipfile
from typing import Any

import numpy as np

from nxgates.core.tensors.read import FORMAT_VERSION, META
from nxgates.errors import ConfigError
from nxgates.gatekit import INPUT_DTYPES, InputSpec, ParamValue


def export_arrays(spec: InputSpec, params: dict[str, ParamValue]) -> dict[str, np.ndarray]:
    """The gate's arrays at ``params``, in their declared dtypes and shapes (a gate that made anything else
    has a bug: refused here rather than written)."""
    made = spec.make(params)
    arrays = {}
    for a in spec.arrays:
        arr = np.ascontiguousarray(made[a.name])
        want = np.dtype(INPUT_DTYPES[a.dtype])
        if arr.dtype != want or arr.shape != a.shape(params):
            raise TypeError(f"input {a.name} made as {arr.dtype} {arr.shape}, declared {want} {a.shape(params)}")
        arrays[a.name] = arr.astype(want.newbyteorder("<"), copy=False)
    return arrays


def write_npz(path: str, gate: str, params: dict[str, ParamValue], arrays: dict[str, np.ndarray]) -> None:
    """``arrays`` and the metadata into ``path``, through a temporary file beside it."""
    meta = json.dumps({"format": FORMAT_VERSION, "gate": gate, "params": params}, sort_keys=True)
    members: dict[str, Any] = {**arrays, META: np.array(meta)}
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".nxgates-", suffix=".npz", dir=os.path.dirname(path) or ".")
        with os.fdopen(fd, "wb") as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, arr in members.items():  # what np.savez writes, with pickling refused
                with zf.open(f"{name}.npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, arr, allow_pickle=False)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise ConfigError(f"--out {path}: cannot write: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
