"""The Q20 LoRA model's input declaration: ``x, W, A, B`` (lora, lora-train)."""

from __future__ import annotations

from typing import Any

from nxgates.core import lora
from nxgates.core.q20 import Q20Overflow
from nxgates.errors import ConfigError
from nxgates.gatekit import InputArray, InputSpec, ParamValue


def _lora_arrays(params: dict[str, ParamValue]) -> dict[str, Any]:
    m = lora.init_model(int(params["T"]), int(params["DM"]), int(params["R"]))
    return {"x": m.x, "W": m.W, "A": m.A, "B": m.B}


def _admit_lora(arrays: dict[str, Any], params: dict[str, ParamValue]) -> None:
    """The model's forward and backward on these values pass every overflow guard (their names say where)."""
    m = lora_model(arrays)
    try:
        lora.backward(m, lora.forward(m))
    except Q20Overflow as exc:
        raise ConfigError(f"arrays x, W, A, B: {exc}") from None


def lora_model(arrays: dict[str, Any]) -> lora.Model:
    """A model of given arrays, copied: a run may write to its tensors (the train-base fault does)."""
    return lora.Model(*(arrays[k].copy() for k in ("x", "W", "A", "B")))


#: lora and lora-train: the input, the frozen base and the adapter, Q20 int64
LORA_INPUTS = InputSpec(
    arrays=(
        InputArray("x", "q20", ("T", "DM"), "input tokens"),
        InputArray("W", "q20", ("DM", "DM"), "frozen base weights"),
        InputArray("A", "q20", ("DM", "R"), "adapter, down"),
        InputArray("B", "q20", ("R", "DM"), "adapter, up"),
    ),
    make=_lora_arrays,
    admit=_admit_lora,
)


def _lora_grads(params: dict[str, ParamValue]) -> dict[str, Any]:
    m = lora.init_model(int(params["T"]), int(params["DM"]), int(params["R"]))
    dA, dB = lora.backward(m, lora.forward(m))
    return {"dA": dA, "dB": dB}


#: the adapter's gradients, as another implementation dumps them for ``--compare-grads`` (Q20 int64)
LORA_GRADS = InputSpec(
    arrays=(
        InputArray("dA", "q20", ("DM", "R"), "gradient of A"),
        InputArray("dB", "q20", ("R", "DM"), "gradient of B"),
    ),
    make=_lora_grads,
)


def read_foreign_grads(path: str, params: dict[str, ParamValue]) -> dict[str, Any]:
    """Another implementation's ``dA``, ``dB``: an ``.npz`` or a directory of raw ``dA.bin``, ``dB.bin``, in
    the shapes of this run (a usage error otherwise)."""
    import os

    from nxgates.tensors.read import read_npz, read_raw_dir

    if os.path.isdir(path):
        return read_raw_dir(path, LORA_GRADS, params, "--compare-grads")
    arrays, _meta = read_npz(path, LORA_GRADS, "--compare-grads")
    for a in LORA_GRADS.arrays:
        want = a.shape(params)
        if arrays[a.name].shape != want:
            raise ConfigError(f"--compare-grads {path}: array {a.name}: shape {arrays[a.name].shape}, expected "
                              f"{want} at DM={params['DM']} R={params['R']}")
    return arrays
